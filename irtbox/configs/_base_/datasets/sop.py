# Stanford Online Products: 59,551 train images (11,318 classes), 60,502 test (11,316).
# Leave-one-out Recall@1/10/100/1000 on the test split.
_base_ = ['./category_level.py']
data_root = 'data/sop'
train_size = 59551

train_dataloader = dict(dataset=dict(type='SOPDataset', data_root=data_root))
val_dataloader = dict(dataset=dict(type='SOPDataset', data_root=data_root))
test_dataloader = val_dataloader
val_evaluator = dict(type='RetrievalMetric', ks=(1, 10, 100, 1000))
test_evaluator = val_evaluator
train_eval_dataloader = dict(dataset=dict(type='SOPDataset', data_root=data_root))
