# Revisited Oxford5k and Paris6k (Radenović et al. 2018), evaluated in one run: queries cropped to
# their boxes before resizing, square 384x384 inputs (IRT Tables 7-8, 384 rows);
# mAP and mP@1/5/10 for the Easy / Medium / Hard protocols, e.g. roxford5k/mAP_M.
# +R1M: add distractors_list / distractors_root to a dataset (see RevisitedDataset).
test_img_size = 384
revisited_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='CropBBox'),
    dict(type='Resize', scale=(test_img_size, test_img_size), keep_ratio=False),
    dict(type='PackRetrievalInputs'),
]
test_dataloader = [
    dict(batch_size=32, num_workers=8, sampler=dict(type='DefaultSampler', shuffle=False),
         dataset=dict(type='RevisitedDataset', data_root='data/roxford5k', dataset_name='roxford5k',
                      pipeline=revisited_pipeline)),
    dict(batch_size=32, num_workers=8, sampler=dict(type='DefaultSampler', shuffle=False),
         dataset=dict(type='RevisitedDataset', data_root='data/rparis6k', dataset_name='rparis6k',
                      pipeline=revisited_pipeline)),
]
test_evaluator = [dict(type='RevisitedMetric'), dict(type='RevisitedMetric')]
test_cfg = dict(type='MultiDatasetTestLoop')
# No validation during training: these are the test sets (monitoring on them would be selection
# on test data). Add val_* = test_* and val_cfg=dict(type='MultiDatasetValLoop') to watch anyway.
