# DToP Table A9, dynamic position embedding resized bicubically (no antialias)
# (default: DPE bilinear).
# Paper (SfM-120k): Oxf5k 87.6, Par6k 91.0, ROxf M/H 65.2 / 38.3, RPar M/H 82.2 / 64.6.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(backbone=dict(pos_embed='dpe-bicubic'))
