# ROxford5k and RParis6k for DToP: images kept at their aspect ratio with the long side 512 (the
# training sizes' long side), queries cropped first, one image per batch (sizes differ), multi-scale
# descriptors from the model; Medium / Hard mAP with and without the learned whitening.
revisited_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='CropBBox'),
    dict(type='Resize', scale=(512, 512), keep_ratio=True),
    dict(type='PackRetrievalInputs'),
]
test_dataloader = [
    dict(batch_size=1, num_workers=8, sampler=dict(type='DefaultSampler', shuffle=False),
         dataset=dict(type='RevisitedDataset', data_root='data/roxford5k', dataset_name='roxford5k',
                      pipeline=revisited_pipeline)),
    dict(batch_size=1, num_workers=8, sampler=dict(type='DefaultSampler', shuffle=False),
         dataset=dict(type='RevisitedDataset', data_root='data/rparis6k', dataset_name='rparis6k',
                      pipeline=revisited_pipeline)),
]
_metrics = [dict(type='RevisitedMetric', protocols=('medium', 'hard')),
            dict(type='RevisitedMetric', protocols=('medium', 'hard'), embedding_key='embedding_raw',
                 tag='no_whitening')]
test_evaluator = [_metrics, _metrics]
test_cfg = dict(type='MultiDatasetTestLoop')
