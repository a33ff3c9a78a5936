# IRT category-level recipe: AdamW lr 3e-5, weight decay 5e-4, batch 64, 35k iterations.
# bf16 autocast for the training forward and loss on GPUs with native bf16, float32 on CPUs
# (BF16AutocastOptimWrapper, enabled='auto'; optim_wrapper.enabled=False trains in float32).
optim_wrapper = dict(type='BF16AutocastOptimWrapper', enabled='auto',
                     optimizer=dict(type='AdamW', lr=3e-5, weight_decay=5e-4))
param_scheduler = []
train_cfg = dict(type='IterBasedTrainLoop', max_iters=35000, val_interval=5000)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
auto_scale_lr = dict(base_batch_size=64, enable=False)
