# SfM-120k tuple training at 384x384 (IRT Tables 7-8, 384 rows); see sfm120k_tuples.py.
_base_ = ['./sfm120k_tuples.py']

sfm_img_size = 384
sfm_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(sfm_img_size, sfm_img_size), keep_ratio=False),
    dict(type='PackRetrievalInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=sfm_pipeline))
sfm_whiten_dataloader = dict(dataset=dict(pipeline=sfm_pipeline))
