# IRT Table 7: IRT_L with deit_small_distilled_patch16_224 (CLS token, 384-d), 224x224 inputs.
_base_ = [
    '../../_base_/models/irt_landmarks_deit-s.py', '../../_base_/datasets/sfm120k_tuples.py',
    '../../_base_/datasets/revisited_oxford_paris.py', '../../_base_/schedules/adam_100e_sfm120k.py'
]

model = dict(
    backbone=dict(model_name='deit_small_distilled_patch16_224'),
    head=dict(losses=dict(_delete_=True, tuple=dict(type='TupleContrastiveLoss', margin=0.85, num_negatives=5)), loss_weights=dict(_delete_=True)))
