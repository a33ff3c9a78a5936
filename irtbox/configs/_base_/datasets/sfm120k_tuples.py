# SfM-120k tuple training (Radenović et al. 2018, as in IRT): every epoch TupleMiningHook draws
# 2,000 query/positive pairs and a pool of 22,000 images, extracts them with the current model and
# picks 5 hard negatives per query (one per 3D model, never the query's); batches of 5 tuples
# (35 images), square inputs of `sfm_img_size`.
sfm_img_size = 224
sfm_root = 'data/sfm120k'
sfm_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(sfm_img_size, sfm_img_size), keep_ratio=False),
    dict(type='PackRetrievalInputs'),
]
train_dataloader = dict(
    batch_size=5,
    num_workers=8,
    persistent_workers=False,  # the tuples change every epoch
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='tuple_collate'),
    dataset=dict(type='SfM120kDataset', data_root=sfm_root, split='train', tuples=True,
                 qsize=2000, nnum=5, pipeline=sfm_pipeline),
)
mining_hook = dict(type='TupleMiningHook', poolsize=22000,
                   dataloader=dict(batch_size=32, num_workers=8))
custom_hooks = [mining_hook]
# Descriptors of the SfM-120k whitening set, for the PCA (▷128) and learned-whitening variants.
sfm_whiten_dataloader = dict(
    batch_size=32, num_workers=8, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='SfMWhitenDataset', data_root=sfm_root, pipeline=sfm_pipeline))
