# DToP Table A10 (with the CNN stem), ELM without the inverted residual block
# (default: IRB + ASPP + WB).
# Paper (SfM-120k): Oxf5k 84.9, Par6k 92.7, ROxf M/H 64.8 / 42.4, RPar M/H 83.4 / 65.7.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(neck=[dict(type='DToPNeck', in_channels=768,
                        elm=dict(type='EnhancedLocalityModule', irb=False))])
