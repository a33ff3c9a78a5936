# DToP Table A9, conditional position encoding (Chu et al.: a residual depthwise 3x3 conv on
# the patch map after the first block, zero-initialised) instead of the learned one
# (default: DPE bilinear).
# Paper (SfM-120k): Oxf5k 85.9, Par6k 88.8, ROxf M/H 62.6 / 37.1, RPar M/H 77.9 / 58.2.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(backbone=dict(pos_embed='cpe'))
