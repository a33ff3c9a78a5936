default_scope = 'irtbox'

default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50),
    param_scheduler=dict(type='ParamSchedulerHook'),
    # No "best" checkpoint: the benchmarks have no validation split, so picking the best
    # on the test set would be selecting on test data. Report the last checkpoint.
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=5000, max_keep_ckpts=2),
    sampler_seed=dict(type='DistSamplerSeedHook'),
)

env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'),
)

vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='Visualizer', vis_backends=vis_backends)
log_processor = dict(by_epoch=False, window_size=50)
log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=0, deterministic=False)
