# DToP Table A13, no fusion, h(Y, U) = Y (Eq. A14; no ELM is built)
# (default: orthogonal, Eq. A20).
# Paper (SfM-120k): Oxf5k 89.8, Par6k 91.2, ROxf M/H 67.6 / 40.7, RPar M/H 81.1 / 62.5.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(neck=[dict(type='DToPNeck', in_channels=768,
                        fusion=dict(type='FeatureFusion', mode='y'), elm=None)])
