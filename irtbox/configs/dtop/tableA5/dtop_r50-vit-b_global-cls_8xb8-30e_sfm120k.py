# DToP Table A5 (backbone benchmark): R50+ViT-B/16 hybrid (ImageNet-21k, the default backbone);
# the global branch only on the multi-layer CLS tokens, an FC layer to N = 768.
# Paper (SfM-120k): Oxf5k 84.3, Par6k 87.9, ROxf M/H 62.6 / 37.9, RPar M/H 79.6 / 64.8.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(
    neck=[dict(type='DToPNeck', in_channels=768,
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
