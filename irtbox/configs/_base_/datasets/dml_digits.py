# The training-recipe benchmark's data recipe on scikit-learn's digits, small enough for a CPU
# (tools/dataset_converters/prepare_digits.py writes data/digits/benchmark_split.csv): digits
# 0-6 are the training split, whose first 5 classes train and last 2 validate
# (val_fraction=0.3), digits 7-9 test. Batches of the 5 classes x M = 8. 16 x 16 inputs (the
# digits are 8 x 8) with a resize-and-crop instead of RandAugment, which distorts 8 x 8 digits
# beyond recognition.
_base_ = ['./dml_common.py']
data_root = 'data/digits'
num_train_classes = 5
val_fraction = 0.3
inner = dict(type='CSVDataset', data_root=data_root, ann_file='benchmark_split.csv')
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(18, 18), keep_ratio=False),
    dict(type='RandomCrop', crop_size=16),
    dict(type='PackRetrievalInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(16, 16), keep_ratio=False),
    dict(type='PackRetrievalInputs'),
]
loader = dict(num_workers=0, persistent_workers=False)
train_dataloader = dict(
    batch_size=40, **loader,
    sampler=dict(batch_size=40, m=8),
    dataset=dict(dataset=inner, val_fraction=val_fraction, pipeline=train_pipeline))
val_dataloader = dict(
    **loader, dataset=dict(dataset=inner, val_fraction=val_fraction, pipeline=test_pipeline))
test_dataloader = dict(**loader, dataset=dict(inner, split='test', pipeline=test_pipeline))
