# DToP Table A10 (with the CNN stem), ELM without WaveBlock
# (default: IRB + ASPP + WB).
# Paper (SfM-120k): Oxf5k 87.0, Par6k 92.0, ROxf M/H 66.5 / 42.8, RPar M/H 82.7 / 65.1.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(neck=[dict(type='DToPNeck', in_channels=768,
                        elm=dict(type='EnhancedLocalityModule', waveblock=False))])
