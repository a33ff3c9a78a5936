# A seconds-long particular-object run on the landmark fixtures: tuple training on SfM-120k with
# hard-negative mining (1 epoch), then ROxford5k (+ distractors) with multi-scale descriptors and a
# whitening learned on the SfM-120k whitening set, reported with and without it.
_base_ = ['../../../configs/_base_/default_runtime.py']

root = 'tests/data/landmarks'
model = dict(
    type='ImageRetriever',
    data_preprocessor=dict(type='ImgDataPreprocessor', mean=[127.5] * 3, std=[127.5] * 3,
                           bgr_to_rgb=True),
    backbone=dict(type='TimmBackbone', model_name='vit_tiny_patch16_224', pretrained=False,
                  img_size=32, patch_size=8, depth=1, embed_dim=32, num_heads=2,
                  dynamic_img_size=True, dynamic_img_pad=True),
    neck=[dict(type='ClsTokenPool')],
    head=dict(type='EmbeddingHead',
              losses=dict(tuple=dict(type='TupleContrastiveLoss', margin=0.85, num_negatives=2),
                          koleo=dict(type='KoLeoLoss')),
              loss_weights=dict(koleo=3.0)),
    whitening=dict(type='LearnedWhitening', in_dim=32),
    test_scales=(1.0, 0.7071),
)
pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(32, 32), keep_ratio=False),
    dict(type='PackRetrievalInputs'),
]
query_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='CropBBox'),
    dict(type='Resize', scale=(32, 32), keep_ratio=False),
    dict(type='PackRetrievalInputs'),
]
train_dataloader = dict(
    batch_size=2, num_workers=0, sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='tuple_collate'),
    dataset=dict(type='SfM120kDataset', data_root=f'{root}/sfm120k', split='train', tuples=True,
                 qsize=4, nnum=2, pipeline=pipeline))
test_dataloader = dict(
    batch_size=4, num_workers=0, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='RevisitedDataset', data_root=f'{root}/roxford5k', dataset_name='roxford5k',
                 # R1M's layout: revisitop1m.txt beside jpg/, its paths relative to jpg/ (a relative
                 # distractors_list is relative to distractors_root).
                 distractors_list='../revisitop1m.txt', distractors_root=f'{root}/revisitop1m/jpg',
                 pipeline=query_pipeline))
test_evaluator = [dict(type='RevisitedMetric'),
                  dict(type='RevisitedMetric', embedding_key='embedding_raw', tag='no_whitening')]
test_cfg = dict(type='TestLoop')
custom_hooks = [
    dict(type='TupleMiningHook', poolsize=20, dataloader=dict(batch_size=8, num_workers=0)),
    dict(type='WhiteningFitHook',
         dataloader=dict(batch_size=4, num_workers=0, sampler=dict(type='DefaultSampler', shuffle=False),
                         dataset=dict(type='SfMWhitenDataset', data_root=f'{root}/sfm120k',
                                      pipeline=pipeline))),
]
optim_wrapper = dict(optimizer=dict(type='Adam', lr=1e-4, weight_decay=1e-6))
param_scheduler = []
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=1)
default_hooks = dict(logger=dict(type='LoggerHook', interval=1),
                     checkpoint=dict(type='CheckpointHook', by_epoch=True, interval=1))
