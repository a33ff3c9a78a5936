_base_ = [
    '../_base_/models/dml_dinov2-vit-b.py', '../_base_/datasets/dml_inat2018.py',
    '../_base_/schedules/dml_adam_1xb256-39k.py', '../_base_/default_runtime.py'
]
# ArcFaceLoss, PML 2.9 defaults; a classifier over the training classes at lr 1.0; M = 1
# (256 distinct classes per batch, one image each).
model = dict(head=dict(losses=dict(metric=dict(
    name='ArcFaceLoss', num_classes={{_base_.num_train_classes}}))))
train_dataloader = dict(sampler=dict(m=1))
