# DToP Table A8, k = 1: the CLS tokens and patch maps of the last 1 of the 12 blocks
# (default k = 6).
# Paper (SfM-120k): Oxf5k 87.2, Par6k 92.4, ROxf M/H 64.9 / 37.6, RPar M/H 81.3 / 62.7.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(backbone=dict(out_indices=(-1,)))
