# IRT category-level augmentation: resize to 256x256, random 224 crop, horizontal flip.
# Test: resize to 256x256 and centre 224 crop (the paper is silent; the usual protocol).
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(256, 256), keep_ratio=False),
    dict(type='RandomCrop', crop_size=224),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackRetrievalInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(256, 256), keep_ratio=False),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackRetrievalInputs'),
]
