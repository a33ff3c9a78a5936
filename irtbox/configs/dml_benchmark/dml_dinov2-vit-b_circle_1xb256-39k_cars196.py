_base_ = [
    '../_base_/models/dml_dinov2-vit-b.py', '../_base_/datasets/dml_cars196.py',
    '../_base_/schedules/dml_adam_1xb256-39k.py', '../_base_/default_runtime.py'
]
# CircleLoss, PML 2.9 defaults, with the multi-similarity miner
# (miner='auto'); M = 4 images per class (64 classes per batch).
model = dict(head=dict(losses=dict(metric=dict(
    name='CircleLoss', num_classes={{_base_.num_train_classes}}))))
