# A seconds-long IRT_R run on the SOP fixture: 1-block ViT on 32x32 inputs, no random augmentation
# (so that an interrupted and resumed run equals an uninterrupted one).
_base_ = ['../../../configs/_base_/default_runtime.py']

data_root = 'tests/data/sop'
# A fixture of 14 images, not SOP's 120,053: the published-count warning would be noise here.
check_dataset_counts = False
model = dict(
    type='ImageRetriever',
    data_preprocessor=dict(type='ImgDataPreprocessor', mean=[127.5] * 3, std=[127.5] * 3,
                           bgr_to_rgb=True),
    backbone=dict(type='TimmBackbone', model_name='vit_tiny_patch16_224', pretrained=False,
                  img_size=32, patch_size=8, depth=1, embed_dim=32, num_heads=2),
    neck=[dict(type='ClsTokenPool')],
    head=dict(
        type='EmbeddingHead',
        losses=dict(
            contrastive=dict(type='ContrastiveLoss', margin=0.5, memory_size=12, embed_dim=32),
            koleo=dict(type='KoLeoLoss')),
        loss_weights=dict(koleo=0.7)),
)
pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(32, 32), keep_ratio=False),
    dict(type='PackRetrievalInputs'),
]
train_dataloader = dict(
    batch_size=4,
    num_workers=0,
    sampler=dict(type='MPerClassSampler', batch_size=4, m=2, infinite=True),
    dataset=dict(type='SOPDataset', data_root=data_root, split='train', pipeline=pipeline),
)
val_dataloader = dict(
    batch_size=4,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='SOPDataset', data_root=data_root, split='test', pipeline=pipeline),
)
test_dataloader = val_dataloader
val_evaluator = dict(type='RetrievalMetric', ks=(1, 2))
test_evaluator = val_evaluator
optim_wrapper = dict(optimizer=dict(type='AdamW', lr=1e-3, weight_decay=5e-4))
param_scheduler = []
train_cfg = dict(type='IterBasedTrainLoop', max_iters=4, val_interval=4)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=1),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=2, max_keep_ckpts=3),
)
