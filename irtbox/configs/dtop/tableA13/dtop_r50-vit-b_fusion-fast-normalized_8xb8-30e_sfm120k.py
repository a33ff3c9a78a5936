# DToP Table A13, fast normalised, (w1 Y + w2 U) / (w1 + w2 + eps), w = relu(v) (Eq. A19)
# (default: orthogonal, Eq. A20).
# Paper (SfM-120k): Oxf5k 89.8, Par6k 92.1, ROxf M/H 68.7 / 43.9, RPar M/H 82.4 / 65.0.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(neck=[dict(type='DToPNeck', in_channels=768,
                        fusion=dict(type='FeatureFusion', mode='fast_normalized'))])
