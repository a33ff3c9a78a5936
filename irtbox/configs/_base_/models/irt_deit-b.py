# IRT with DeiT-Base (deit_base_patch16_224): CLS token of the last layer, L2-normalised, 768-d.
_base_ = ['./irt_deit-s.py']

model = dict(
    backbone=dict(model_name='deit_base_patch16_224'),
    head=dict(losses=dict(contrastive=dict(embed_dim=768))))
