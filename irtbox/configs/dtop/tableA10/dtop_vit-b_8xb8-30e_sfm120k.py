# DToP-ViT-B: the full model on the plain ViT-B/16 (ImageNet-21k, no CNN stem), Table A10 row 4.
# Rows 1-4 of Table A10 (no CNN stem): their check marks are lost in the text of the
# supplementary; we read them as rows 5-8 (one component dropped, then all three).
# Paper (SfM-120k): Oxf5k 81.5, Par6k 89.8, ROxf M/H 61.4 / 32.5, RPar M/H 79.7 / 57.4.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(
    backbone=dict(model_name='vit_base_patch16_384'),
)
