# A 2-iteration CPU DToP run on the landmark fixtures: a 2-block tiny ViT with dynamic position
# embedding, the DToP neck (small ELM), ArcFace on SfM-120k clusters, group-size batches; then
# ROxford5k with 3 scales and learned whitening (with and without).
_base_ = ['../../../configs/_base_/default_runtime.py']

root = 'tests/data/landmarks'
model = dict(
    type='ImageRetriever',
    data_preprocessor=dict(type='TimmDataPreprocessor', model_name='vit_base_r50_s16_384',
                           bgr_to_rgb=True),
    backbone=dict(type='TimmBackbone', model_name='vit_tiny_patch16_224', pretrained=False,
                  img_size=32, patch_size=8, depth=2, embed_dim=32, num_heads=2,
                  out_indices=(-2, -1), norm='all', pos_embed='dpe-bilinear'),
    neck=[dict(type='DToPNeck', in_channels=32,
               elm=dict(type='EnhancedLocalityModule', channels=8))],
    head=dict(type='EmbeddingHead',
              losses=dict(arcface=dict(type='ArcFaceLoss', num_classes=8, embed_dim=64,
                                       margin=0.15, scale=30.0))),
    whitening=dict(type='LearnedWhitening', in_dim=64),
    test_scales=(1.0, 0.7071, 0.5),
)
sizes = ((64, 44), (64, 48), (56, 56), (48, 64), (44, 64))
train_dataloader = dict(
    batch_size=2, num_workers=0,
    sampler=dict(type='GroupSizeSampler', batch_size=2, infinite=True),
    dataset=dict(type='SfM120kDataset', data_root=f'{root}/sfm120k', split='train',
                 pipeline=[dict(type='LoadImageFromFile'),
                           dict(type='GroupResize', sizes=sizes, crop_scale=(0.5, 1.0)),
                           dict(type='RandomIllumination'),
                           dict(type='PackRetrievalInputs')]))
test_pipeline = [dict(type='LoadImageFromFile'), dict(type='CropBBox'),
                 dict(type='Resize', scale=(64, 64), keep_ratio=True), dict(type='PackRetrievalInputs')]
test_dataloader = dict(
    batch_size=1, num_workers=0, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='RevisitedDataset', data_root=f'{root}/roxford5k', dataset_name='roxford5k',
                 pipeline=test_pipeline))
test_evaluator = [dict(type='RevisitedMetric', protocols=('medium', 'hard')),
                  dict(type='RevisitedMetric', protocols=('medium', 'hard'),
                       embedding_key='embedding_raw', tag='no_whitening')]
test_cfg = dict(type='TestLoop')
custom_hooks = [
    dict(type='WhiteningFitHook',
         dataloader=dict(batch_size=1, num_workers=0, sampler=dict(type='DefaultSampler', shuffle=False),
                         dataset=dict(type='SfMWhitenDataset', data_root=f'{root}/sfm120k',
                                      pipeline=[dict(type='LoadImageFromFile'),
                                                dict(type='Resize', scale=(64, 64), keep_ratio=True),
                                                dict(type='PackRetrievalInputs')])))
]
optim_wrapper = dict(optimizer=dict(type='SGD', lr=1e-3, momentum=0.9, weight_decay=1e-4))
param_scheduler = [dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=1),
                   dict(type='CosineAnnealingLR', eta_min_ratio=1e-4, by_epoch=False, begin=1, end=2,
                        T_max=1)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=2)
default_hooks = dict(logger=dict(type='LoggerHook', interval=1),
                     checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=2))
