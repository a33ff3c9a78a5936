# IRT category-level recipe: AdamW lr 3e-5, weight decay 5e-4, batch 64, 35k iterations.
optim_wrapper = dict(optimizer=dict(type='AdamW', lr=3e-5, weight_decay=5e-4))
param_scheduler = []
train_cfg = dict(type='IterBasedTrainLoop', max_iters=35000, val_interval=5000)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
auto_scale_lr = dict(base_batch_size=64, enable=False)
