# IRT_L, particular objects (Tables 3 and 6, λ = 0): DeiT-S CLS, 384-d, 224x224, SfM-120k tuples,
# tuple contrastive loss (margin 0.85). Paper: ROxf M/H 32.7 / 11.4, RPar M/H 63.6 / 37.8.
_base_ = [
    '../../_base_/models/irt_landmarks_deit-s.py', '../../_base_/datasets/sfm120k_tuples.py',
    '../../_base_/datasets/revisited_oxford_paris.py', '../../_base_/schedules/adam_100e_sfm120k.py'
]

model = dict(head=dict(losses=dict(_delete_=True, tuple=dict(type='TupleContrastiveLoss', margin=0.85, num_negatives=5)), loss_weights=dict(_delete_=True)))
