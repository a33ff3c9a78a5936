# DToP Table A13, sum, h(Y, U) = Y + U (Eq. A16)
# (default: orthogonal, Eq. A20).
# Paper (SfM-120k): Oxf5k 89.5, Par6k 91.7, ROxf M/H 68.4 / 43.4, RPar M/H 82.1 / 64.2.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(neck=[dict(type='DToPNeck', in_channels=768,
                        fusion=dict(type='FeatureFusion', mode='sum'))])
