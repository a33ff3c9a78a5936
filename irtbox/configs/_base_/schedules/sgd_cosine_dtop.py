# DToP's optimisation: SGD momentum 0.9, lr 1e-3, linear warm-up for `warmup_epochs`, then cosine
# decay to 1e-4 x lr at `max_epochs` (epochs and weight decay are not given in the paper: ours).
_base_ = ['../default_runtime.py']

max_epochs = 30
warmup_epochs = 3
# bf16 autocast for the training forward and loss on GPUs with native bf16, float32 on CPUs
# (BF16AutocastOptimWrapper, enabled='auto'; optim_wrapper.enabled=False trains in float32).
optim_wrapper = dict(type='BF16AutocastOptimWrapper', enabled='auto',
                     optimizer=dict(type='SGD', lr=1e-3, momentum=0.9, weight_decay=1e-4))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, begin=0, end=warmup_epochs,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min_ratio=1e-4, by_epoch=True, begin=warmup_epochs,
         end=max_epochs, T_max=max_epochs - warmup_epochs, convert_to_iter_based=True),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs)
val_cfg = None
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=True, interval=5,
                                     max_keep_ckpts=2))
log_processor = dict(by_epoch=True)
