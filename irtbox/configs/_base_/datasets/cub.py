# CUB-200-2011: classes 1-100 train (5,864 images), 101-200 test (5,924).
# Leave-one-out Recall@1/2/4/8 on the test split.
_base_ = ['./category_level.py']
data_root = 'data/cub'
train_size = 5864

train_dataloader = dict(dataset=dict(type='CUBDataset', data_root=data_root))
val_dataloader = dict(dataset=dict(type='CUBDataset', data_root=data_root))
test_dataloader = val_dataloader
val_evaluator = dict(type='RetrievalMetric', ks=(1, 2, 4, 8))
test_evaluator = val_evaluator
train_eval_dataloader = dict(dataset=dict(type='CUBDataset', data_root=data_root))
