# Cars196: classes 1-98 train, 99-196 test; 78 training classes / 20 validation.
_base_ = ['./dml_common.py']
data_root = 'data/cars196'
num_train_classes = 78  # classes of the 80% part: the classifier size
inner = dict(type='Cars196Dataset', data_root=data_root)
train_dataloader = dict(dataset=dict(dataset=inner))
val_dataloader = dict(dataset=dict(dataset=inner))
test_dataloader = dict(dataset=inner)
