# IRT Table 7 / 8: IRT_L with deit_base_distilled_patch16_384 (CLS token, 768-d), 384x384 inputs.
_base_ = [
    '../../_base_/models/irt_landmarks_deit-s.py', '../../_base_/datasets/sfm120k_tuples_384.py',
    '../../_base_/datasets/revisited_oxford_paris_384.py', '../../_base_/schedules/adam_100e_sfm120k.py'
]

model = dict(
    backbone=dict(model_name='deit_base_distilled_patch16_384'),
    head=dict(losses=dict(_delete_=True, tuple=dict(type='TupleContrastiveLoss', margin=0.85, num_negatives=5)), loss_weights=dict(_delete_=True)))
