# IRT_R, particular objects (Table 3): IRT_L + KoLeo with λ = 4.0 (Table 6 row of the reported
# IRT_R: ROxf M/H 34.0 / 11.5, RPar M/H 66.1 / 40.2).
_base_ = [
    '../../_base_/models/irt_landmarks_deit-s.py', '../../_base_/datasets/sfm120k_tuples.py',
    '../../_base_/datasets/revisited_oxford_paris.py', '../../_base_/schedules/adam_100e_sfm120k.py'
]

model = dict(head=dict(loss_weights=dict(koleo=4.0)))
