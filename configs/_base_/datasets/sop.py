# Stanford Online Products: 59,551 train images (11,318 classes), 60,502 test (11,316).
# Leave-one-out Recall@1/10/100/1000 on the test split.
_base_ = ['./pipelines_224.py']
data_root = 'data/sop'
train_size = 59551

train_dataloader = dict(
    batch_size=64,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='MPerClassSampler', batch_size=64, m=4, infinite=True),
    dataset=dict(type='SOPDataset', data_root=data_root, split='train',
                 pipeline={{_base_.train_pipeline}}),
)
val_dataloader = dict(
    batch_size=128,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='SOPDataset', data_root=data_root, split='test',
                 pipeline={{_base_.test_pipeline}}),
)
test_dataloader = val_dataloader
val_evaluator = dict(type='RetrievalMetric', ks=(1, 10, 100, 1000))
test_evaluator = val_evaluator
# The training set seen in test mode (PCA fitting for the ▷128 variants).
train_eval_dataloader = dict(
    batch_size=128,
    num_workers=8,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='SOPDataset', data_root=data_root, split='train',
                 pipeline={{_base_.test_pipeline}}),
)
