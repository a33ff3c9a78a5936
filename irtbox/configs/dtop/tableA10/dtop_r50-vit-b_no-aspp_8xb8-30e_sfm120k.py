# DToP Table A10 (with the CNN stem), ELM without the atrous spatial pyramid pooling
# (default: IRB + ASPP + WB).
# Paper (SfM-120k): Oxf5k 85.3, Par6k 93.0, ROxf M/H 65.7 / 42.8, RPar M/H 83.0 / 65.4.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(neck=[dict(type='DToPNeck', in_channels=768,
                        elm=dict(type='EnhancedLocalityModule', aspp=False))])
