# Training-recipe benchmark: DINOv2 ViT-B/14, whole model fine-tuned; the CLS token of the last
# layer, L2-normalised, 768-d. timm's default input for this model is 518 x 518; img_size=224
# resizes the position embeddings (interpolated from the pretrained 37 x 37 grid) to the
# benchmark's 224 x 224 inputs (16 x 16 patches of 14 px).
# The head holds one loss, 'metric'; the loss configs set its PML class `name` and
# `num_classes` (the training classes). Every loss gets num_classes and embedding_size (the
# contrastive ones only check them), so model.head.losses.metric.name=<PML class> switches
# the loss with one key.
# The output-dimension factor (Fig. 7) is the LinearProjection neck's out_dim: None (the raw
# CLS, no layer) here; model.neck.1.out_dim=d adds a trained d-dimensional linear layer (with
# model.head.losses.metric.embedding_size=d, which the classification losses need and the
# others check).
embed_dim = 768
model = dict(
    type='ImageRetriever',
    data_preprocessor=dict(
        type='ImgDataPreprocessor',
        mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], bgr_to_rgb=True),
    backbone=dict(type='TimmBackbone', model_name='vit_base_patch14_dinov2.lvd142m',
                  pretrained=True, img_size=224),
    neck=[dict(type='ClsTokenPool'),
          dict(type='LinearProjection', in_dim=embed_dim, out_dim=None)],
    head=dict(type='EmbeddingHead',
              losses=dict(metric=dict(type='PMLLoss', name='MultiSimilarityLoss',
                                       embedding_size=embed_dim))),
)
