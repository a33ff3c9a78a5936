# Training-recipe benchmark (Berton, Musgrave & Masone): 224 x 224 inputs (resized, aspect
# not kept), RandAugment (3 operations, magnitude 9) on training images only. ImageNet
# normalisation is in the model's data preprocessor.
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(224, 224), keep_ratio=False),
    dict(type='RandAugment', num_ops=3, magnitude=9),
    dict(type='PackRetrievalInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(224, 224), keep_ratio=False),
    dict(type='PackRetrievalInputs'),
]
