# CUB-200-2011: classes 1-100 train, 101-200 test; 80 training classes / 20 validation.
_base_ = ['./dml_common.py']
data_root = 'data/cub'
num_train_classes = 80  # classes of the 80% part: the classifier size
inner = dict(type='CUBDataset', data_root=data_root)
train_dataloader = dict(dataset=dict(dataset=inner))
val_dataloader = dict(dataset=dict(dataset=inner))
test_dataloader = dict(dataset=inner)
