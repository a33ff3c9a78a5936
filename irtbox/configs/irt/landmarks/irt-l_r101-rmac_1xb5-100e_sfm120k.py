# IRT Table 7: R101 (resnet101.tv_in1k) with R-MAC, 2048-d, 224x224, fine-tuned like IRT_L.
_base_ = [
    '../../_base_/models/irt_landmarks_deit-s.py', '../../_base_/datasets/sfm120k_tuples.py',
    '../../_base_/datasets/revisited_oxford_paris.py', '../../_base_/schedules/adam_100e_sfm120k.py'
]

model = dict(
    backbone=dict(model_name='resnet101.tv_in1k'),
    neck=[dict(type='RMACPool', levels=3)],
    head=dict(losses=dict(_delete_=True, tuple=dict(type='TupleContrastiveLoss', margin=0.85, num_negatives=5)), loss_weights=dict(_delete_=True)))
