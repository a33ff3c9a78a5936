# DToP Table A5 (backbone benchmark): PiT-B with its distillation token (ImageNet-1k);
# k = 4, the blocks of its last stage (the neck needs one width and one grid;
# the stages before are 512-wide);
# the global branch only on the multi-layer CLS tokens, an FC layer to N = 768.
# Paper (SfM-120k): Oxf5k 69.0, Par6k 77.0, ROxf M/H 43.6 / 19.8, RPar M/H 59.1 / 28.7.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(
    backbone=dict(model_name='pit_b_distilled_224', out_indices=(-4, -3, -2, -1)),
    neck=[dict(type='DToPNeck', in_channels=1024,
               branches='global', global_token='cls', out_dim=768,
               project=True)],
    head=dict(losses=dict(arcface=dict(embed_dim=768))),
    whitening=dict(in_dim=768),
)
# Table A5's setting: default training without warm-up.
param_scheduler = [
    dict(type='CosineAnnealingLR', eta_min_ratio=1e-4, by_epoch=True, begin=0, end=30, T_max=30,
         convert_to_iter_based=True),
]
