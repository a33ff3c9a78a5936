# DToP Table A10 on the plain ViT-B/16 (no CNN stem), ELM without
# WaveBlock.
# Rows 1-4 of Table A10 (no CNN stem): their check marks are lost in the text of the
# supplementary; we read them as rows 5-8 (one component dropped, then all three).
# Paper (SfM-120k): Oxf5k 80.1, Par6k 88.2, ROxf M/H 59.8 / 28.8, RPar M/H 77.7 / 54.2.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(
    backbone=dict(model_name='vit_base_patch16_384'),
    neck=[dict(type='DToPNeck', in_channels=768,
               elm=dict(type='EnhancedLocalityModule', waveblock=False))],
)
