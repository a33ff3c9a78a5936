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
    # 'auto': on a GPU, cuDNN tunes its convolutions once per input shape where every pipeline
    # gives one size (category-level sets), not where sizes vary (landmarks). True / False force it.
    cudnn_benchmark='auto',
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    # timeout: seconds a collective waits for the other ranks (NCCL's default is 10 min).
    # Some steps run on rank 0 alone while the others wait: the metric's search (a landmark
    # test with 1M distractors on CPU faiss), the whitening / PCA fit, the merge of an
    # extraction, a pretrained download. Two hours covers them; raise it for bigger sets.
    dist_cfg=dict(backend='nccl', timeout=7200),
    # TensorFloat-32 for a GPU's float32 matrix products outside bf16 autocast (validation,
    # float32 losses): about 1e-3 relative error, several times the speed. False: exact float32.
    allow_tf32=True,
)

vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='Visualizer', vis_backends=vis_backends)
log_processor = dict(by_epoch=False, window_size=50)
log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=0, deterministic=False)
