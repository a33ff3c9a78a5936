# IRT Table 7: R50 (resnet50.tv_in1k) with GeM (p = 3), 2048-d, 224x224, fine-tuned like IRT_L.
_base_ = [
    '../../_base_/models/irt_landmarks_deit-s.py', '../../_base_/datasets/sfm120k_tuples.py',
    '../../_base_/datasets/revisited_oxford_paris.py', '../../_base_/schedules/adam_100e_sfm120k.py'
]

model = dict(
    backbone=dict(model_name='resnet50.tv_in1k'),
    neck=[dict(type='GeMPool', p=3.0)],
    head=dict(losses=dict(_delete_=True, tuple=dict(type='TupleContrastiveLoss', margin=0.85, num_negatives=5)), loss_weights=dict(_delete_=True)))

# GeM's p: learning rate x 10 and no weight decay (Radenović et al.).
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'neck.0.p': dict(lr_mult=10.0, decay_mult=0.0)}))
