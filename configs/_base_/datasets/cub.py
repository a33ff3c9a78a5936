# CUB-200-2011: classes 1-100 train (5,864 images), 101-200 test (5,924).
# Leave-one-out Recall@1/2/4/8 on the test split.
_base_ = ['./pipelines_224.py']
data_root = 'data/cub'
train_size = 5864

train_dataloader = dict(
    batch_size=64,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='MPerClassSampler', batch_size=64, m=4, infinite=True),
    dataset=dict(type='CUBDataset', data_root=data_root, split='train',
                 pipeline={{_base_.train_pipeline}}),
)
val_dataloader = dict(
    batch_size=128,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='CUBDataset', data_root=data_root, split='test',
                 pipeline={{_base_.test_pipeline}}),
)
test_dataloader = val_dataloader
val_evaluator = dict(type='RetrievalMetric', ks=(1, 2, 4, 8))
test_evaluator = val_evaluator
# The training set seen in test mode (PCA fitting for the ▷128 variants).
train_eval_dataloader = dict(
    batch_size=128,
    num_workers=8,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='CUBDataset', data_root=data_root, split='train',
                 pipeline={{_base_.test_pipeline}}),
)
