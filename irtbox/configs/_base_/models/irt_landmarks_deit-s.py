# IRT for particular objects (SfM-120k tuples): DeiT-S CLS token, 384-d, the tuple contrastive
# loss (margin 0.85) and KoLeo (weight λ; IRT_L configs remove it, Table 6 varies it).
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
            tuple=dict(type='TupleContrastiveLoss', margin=0.85, num_negatives=5),
            koleo=dict(type='KoLeoLoss')),
        loss_weights=dict(koleo=3.0)),
)
