# IRT with DeiT-Small: CLS token of the last layer, L2-normalised, 384-d.
# The head holds the contrastive loss (Eq. 1) with cross-batch memory and KoLeo (Eq. 5);
# the dataset configs set the memory size, the method configs the loss weights.
model = dict(
    type='ImageRetriever',
    data_preprocessor=dict(
        type='ImgDataPreprocessor',
        mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], bgr_to_rgb=True),
    backbone=dict(type='TimmBackbone', model_name='deit_small_patch16_224', pretrained=True),
    neck=[dict(type='ClsTokenPool')],
    head=dict(
        type='EmbeddingHead',
        losses=dict(
            contrastive=dict(type='ContrastiveLoss', margin=0.5, memory_size=0, embed_dim=384),
            koleo=dict(type='KoLeoLoss')),
        loss_weights=dict(koleo=0.7)),
)
