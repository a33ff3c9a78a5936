_base_ = ['../default_runtime.py']

# Particular-object recipe of Radenović et al. used by IRT: Adam lr 5e-7, weight decay 1e-6,
# 100 epochs of 2,000 tuples (400 iterations of 5 tuples).
# bf16 autocast for the training forward and loss on GPUs with native bf16, float32 on CPUs
# (BF16AutocastOptimWrapper, enabled='auto'; optim_wrapper.enabled=False trains in float32).
optim_wrapper = dict(type='BF16AutocastOptimWrapper', enabled='auto',
                     optimizer=dict(type='Adam', lr=5e-7, weight_decay=1e-6))
param_scheduler = []
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=100)
val_cfg = None
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=True, interval=10,
                                     max_keep_ckpts=2))
log_processor = dict(by_epoch=True)
