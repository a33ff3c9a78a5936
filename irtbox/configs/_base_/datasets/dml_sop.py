# Stanford Online Products: 11,318 train classes, 11,316 test; 9,054 training / 2,264 validation.
_base_ = ['./dml_common.py']
data_root = 'data/sop'
num_train_classes = 9054  # classes of the 80% part: the classifier size
inner = dict(type='SOPDataset', data_root=data_root)
train_dataloader = dict(dataset=dict(dataset=inner))
val_dataloader = dict(dataset=dict(dataset=inner))
test_dataloader = dict(dataset=inner)
