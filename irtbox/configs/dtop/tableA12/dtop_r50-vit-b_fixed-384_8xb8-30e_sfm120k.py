# DToP Table A12, fixed-size sampling: random batches (any aspect ratios mixed), every image
# resized to 384 x 384 (default: group-size batches, one aspect-ratio group each, resized to
# the group's size). Same crop / illumination augmentation; incomplete batches dropped.
# Paper (SfM-120k): Oxf5k 83.2, Par6k 90.6, ROxf M/H 60.5 / 35.7, RPar M/H 79.5 / 59.8.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
train_dataloader = dict(
    sampler=dict(_delete_=True, type='DefaultSampler', shuffle=True),
    drop_last=True,
    dataset=dict(pipeline=[
        dict(type='LoadImageFromFile'),
        # GroupResize's crop, then one 384 x 384 size for every aspect-ratio group.
        dict(type='GroupResize', sizes=((384, 384), ) * 5, crop_scale=(0.5, 1.0)),
        dict(type='RandomIllumination', brightness=0.2, contrast=0.2, prob=0.5),
        dict(type='PackRetrievalInputs'),
    ]))
