# The ResNet-50 baseline of IRT (Tables 4, 5): average pooling of the last 2048-channel map,
# L2-normalised, 2048-d (the paper does not name the category-level pooler; see configs/irt/README).
# Weights: torchvision's ImageNet-1k ResNet-50 (timm tag tv_in1k, 76.1% top-1), the closest to the
# paper's Table 1 (76.2%); timm's default resnet50 tag (a1_in1k) is a much stronger recipe.
_base_ = ['./irt_deit-s.py']

model = dict(
    backbone=dict(model_name='resnet50.tv_in1k'),
    neck=[dict(type='AvgPool')],
    head=dict(losses=dict(contrastive=dict(embed_dim=2048))))
