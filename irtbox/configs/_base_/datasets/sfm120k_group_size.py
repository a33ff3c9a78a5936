# SfM-120k as a classification set (3D-model ids as labels) for DToP: group-size sampling (Yokoo et
# al.: 5 aspect-ratio groups, each batch from one group and resized to its size), random crop /
# scale (GroupResize crop_scale) and illumination augmentation. batch_size is per process
# (8 x 8 = the paper's 64 on 8 GPUs).
sfm_root = 'data/sfm120k'
group_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='GroupResize', crop_scale=(0.5, 1.0)),
    dict(type='RandomIllumination', brightness=0.2, contrast=0.2, prob=0.5),
    dict(type='PackRetrievalInputs'),
]
train_dataloader = dict(
    batch_size=8,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='GroupSizeSampler', batch_size=8),
    dataset=dict(type='SfM120kDataset', data_root=sfm_root, split='train', pipeline=group_pipeline),
)
# Whitening set, extracted exactly as the test images (see revisited_dtop.py).
whiten_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(512, 512), keep_ratio=True),
    dict(type='PackRetrievalInputs'),
]
custom_hooks = [
    dict(type='WhiteningFitHook',
         dataloader=dict(batch_size=1, num_workers=8,
                         sampler=dict(type='DefaultSampler', shuffle=False),
                         dataset=dict(type='SfMWhitenDataset', data_root=sfm_root,
                                      pipeline=whiten_pipeline)))
]
