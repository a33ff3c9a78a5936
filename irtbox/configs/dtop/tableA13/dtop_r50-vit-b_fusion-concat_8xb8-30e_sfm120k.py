# DToP Table A13, concatenation, h(Y, U) = [Y; U] (Eq. A18; folded to D after pooling)
# (default: orthogonal, Eq. A20).
# Paper (SfM-120k): Oxf5k 88.8, Par6k 92.5, ROxf M/H 67.5 / 43.9, RPar M/H 82.7 / 64.9.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(neck=[dict(type='DToPNeck', in_channels=768,
                        fusion=dict(type='FeatureFusion', mode='concat'))])
