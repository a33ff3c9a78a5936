# DToP Table A8, k = 12: the CLS tokens and patch maps of the last 12 of the 12 blocks
# (default k = 6).
# Paper (SfM-120k): Oxf5k 89.0, Par6k 92.4, ROxf M/H 68.1 / 43.2, RPar M/H 83.0 / 65.5.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(backbone=dict(out_indices=(-12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1)))
