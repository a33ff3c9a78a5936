# DToP-R50+ViT-B (Song et al., WACV 2023; reconstruction, see configs/dtop/README.md): the hybrid
# R50+ViT-B/16 (ImageNet-21k, mean = std = 0.5 from timm's pretrained config), the last k = 6 blocks
# (CLS tokens and patch maps, each through the final LayerNorm), dynamic position embedding
# (bilinear), the DToP neck (1536-d, ~0.3M parameters), ArcFace (margin 0.15, scale 30);
# multi-scale (1, 1/√2, 1/2) descriptors and supervised whitening at test time.
num_classes = 551  # 3D models of SfM-120k's train split; the dataset configs set their own
model = dict(
    type='ImageRetriever',
    data_preprocessor=dict(type='TimmDataPreprocessor', bgr_to_rgb=True),
    backbone=dict(type='TimmBackbone', model_name='vit_base_r50_s16_384', pretrained=True,
                  out_indices=(-6, -5, -4, -3, -2, -1), norm='all', pos_embed='dpe-bilinear'),
    neck=[dict(type='DToPNeck', in_channels=768)],
    head=dict(type='EmbeddingHead',
              losses=dict(arcface=dict(type='ArcFaceLoss', num_classes=num_classes, embed_dim=1536,
                                       margin=0.15, scale=30.0))),
    whitening=dict(type='LearnedWhitening', in_dim=1536),
    test_scales=(1.0, 0.7071, 0.5),
)
