# The training-recipe benchmark's model, shrunk for CPU runs on the digits data: the
# 4-block ViT-Tiny of the quick start, on 16 x 16 inputs (random init, nothing to download), CLS
# token (192-d) then the output-dimension neck (out_dim=None: the raw CLS), L2-normalised.
embed_dim = 192
model = dict(
    type='ImageRetriever',
    data_preprocessor=dict(type='ImgDataPreprocessor', mean=[127.5] * 3, std=[127.5] * 3),
    backbone=dict(type='TimmBackbone', model_name='vit_tiny_patch16_224', pretrained=False,
                  img_size=16, patch_size=4, depth=4),
    neck=[dict(type='ClsTokenPool'),
          dict(type='LinearProjection', in_dim=embed_dim, out_dim=None)],
    head=dict(type='EmbeddingHead',
              losses=dict(metric=dict(type='PMLLoss', name='MultiSimilarityLoss',
                                       embedding_size=embed_dim))),
)
