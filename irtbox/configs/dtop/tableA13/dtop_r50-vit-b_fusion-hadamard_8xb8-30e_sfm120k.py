# DToP Table A13, Hadamard product, h(Y, U) = Y * U (Eq. A17)
# (default: orthogonal, Eq. A20).
# Paper (SfM-120k): Oxf5k 89.8, Par6k 92.0, ROxf M/H 68.2 / 43.5, RPar M/H 83.1 / 66.0.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(neck=[dict(type='DToPNeck', in_channels=768,
                        fusion=dict(type='FeatureFusion', mode='hadamard'))])
