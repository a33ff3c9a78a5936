_base_ = ['../default_runtime.py']

# Particular-object recipe of Radenović et al. used by IRT: Adam lr 5e-7, weight decay 1e-6,
# 100 epochs of 2,000 tuples (400 iterations of 5 tuples).
optim_wrapper = dict(optimizer=dict(type='Adam', lr=5e-7, weight_decay=1e-6))
param_scheduler = []
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=100)
val_cfg = None
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=True, interval=10,
                                     max_keep_ckpts=2))
log_processor = dict(by_epoch=True)
