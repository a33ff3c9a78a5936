# DToP Table A8, k = 3: the CLS tokens and patch maps of the last 3 of the 12 blocks
# (default k = 6).
# Paper (SfM-120k): Oxf5k 88.0, Par6k 91.1, ROxf M/H 64.9 / 38.6, RPar M/H 82.1 / 64.7.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(backbone=dict(out_indices=(-3, -2, -1)))
