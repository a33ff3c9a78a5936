# DToP Table A8, k = 9: the CLS tokens and patch maps of the last 9 of the 12 blocks
# (default k = 6).
# Paper (SfM-120k): Oxf5k 87.1, Par6k 93.1, ROxf M/H 66.8 / 41.4, RPar M/H 82.4 / 64.2.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(backbone=dict(out_indices=(-9, -8, -7, -6, -5, -4, -3, -2, -1)))
