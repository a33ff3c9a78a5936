# In-Shop Clothes Retrieval: 25,882 train images (3,997 items); 14,218 queries searched
# in a 12,612-image gallery, Recall@1/10/20/30/40/50.
_base_ = ['./pipelines_224.py']
data_root = 'data/inshop'
train_size = 25882

train_dataloader = dict(
    batch_size=64,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='MPerClassSampler', batch_size=64, m=4, infinite=True),
    dataset=dict(type='InShopDataset', data_root=data_root, split='train',
                 pipeline={{_base_.train_pipeline}}),
)
val_dataloader = dict(
    batch_size=128,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='InShopDataset', data_root=data_root, split='test',
                 pipeline={{_base_.test_pipeline}}),
)
test_dataloader = val_dataloader
val_evaluator = dict(type='RetrievalMetric', ks=(1, 10, 20, 30, 40, 50))
test_evaluator = val_evaluator
train_eval_dataloader = dict(
    batch_size=128,
    num_workers=8,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='InShopDataset', data_root=data_root, split='train',
                 pipeline={{_base_.test_pipeline}}),
)
