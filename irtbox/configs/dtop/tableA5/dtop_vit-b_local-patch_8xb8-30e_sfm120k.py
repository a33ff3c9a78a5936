# DToP Table A5 (backbone benchmark): plain ViT-B/16 (ImageNet-21k);
# the local branch only on the multi-layer patch maps, without ELM (Y' = Y),
# global average pooling, an FC layer to N = 768.
# Paper (SfM-120k): Oxf5k 60.4, Par6k 81.0, ROxf M/H 38.6 / 12.0, RPar M/H 69.2 / 46.9.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(
    backbone=dict(model_name='vit_base_patch16_384'),
    neck=[dict(type='DToPNeck', in_channels=768,
               branches='local', fusion=dict(type='FeatureFusion', mode='y'), elm=None,
               pool='avg', out_dim=768,
               project=True)],
    head=dict(losses=dict(arcface=dict(embed_dim=768))),
    whitening=dict(in_dim=768),
)
# Table A5's setting: default training without warm-up.
param_scheduler = [
    dict(type='CosineAnnealingLR', eta_min_ratio=1e-4, by_epoch=True, begin=0, end=30, T_max=30,
         convert_to_iter_based=True),
]
