# IRT_R DeiT-S with multi-scale descriptors (scales 1, 1/√2, 1/2) and the learned whitening "Lw"
# of Radenović et al. (SfM-120k whitening set), reported with and without whitening in one run.
# Not in the IRT tables (IRT uses single-scale CLS); the landmark recipe of cnnimageretrieval.
_base_ = ['./irt-r_deit-s_1xb5-100e_sfm120k.py']

model = dict(
    backbone=dict(dynamic_img_size=True, dynamic_img_pad=True),
    whitening=dict(type='LearnedWhitening', in_dim=384),
    test_scales=(1.0, 0.7071, 0.5))
custom_hooks = [{{_base_.mining_hook}},
                dict(type='WhiteningFitHook', dataloader={{_base_.sfm_whiten_dataloader}})]
test_evaluator = [
    [dict(type='RevisitedMetric'),
     dict(type='RevisitedMetric', embedding_key='embedding_raw', tag='no_whitening')],
    [dict(type='RevisitedMetric'),
     dict(type='RevisitedMetric', embedding_key='embedding_raw', tag='no_whitening')],
]
