# iNaturalist 2018, retrieval split of Brown et al.: 5,690 train classes, 2,452 test;
# 4,552 training classes / 1,138 validation.
_base_ = ['./dml_common.py']
data_root = 'data/inat2018'
num_train_classes = 4552  # classes of the 80% part: the classifier size
inner = dict(type='INaturalist2018Dataset', data_root=data_root)
train_dataloader = dict(dataset=dict(dataset=inner))
val_dataloader = dict(dataset=dict(dataset=inner))
test_dataloader = dict(dataset=inner)
