# DToP Table A9, no position embedding at all
# (default: DPE bilinear).
# Paper (SfM-120k): Oxf5k 82.8, Par6k 85.7, ROxf M/H 59.7 / 32.5, RPar M/H 73.9 / 47.4.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(backbone=dict(pos_embed='none'))
