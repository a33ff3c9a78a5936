# DToP Table A13, no fusion, h(Y, U) = U = ELM(Y) (Eq. A15)
# (default: orthogonal, Eq. A20).
# Paper (SfM-120k): Oxf5k 85.9, Par6k 91.9, ROxf M/H 64.6 / 40.6, RPar M/H 82.6 / 65.4.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(neck=[dict(type='DToPNeck', in_channels=768,
                        fusion=dict(type='FeatureFusion', mode='u'))])
