# In-Shop Clothes Retrieval: 25,882 train images (3,997 items); 14,218 queries searched
# in a 12,612-image gallery, Recall@1/10/20/30/40/50.
_base_ = ['./category_level.py']
data_root = 'data/inshop'
train_size = 25882

train_dataloader = dict(dataset=dict(type='InShopDataset', data_root=data_root))
val_dataloader = dict(dataset=dict(type='InShopDataset', data_root=data_root))
test_dataloader = val_dataloader
val_evaluator = dict(type='RetrievalMetric', ks=(1, 10, 20, 30, 40, 50))
test_evaluator = val_evaluator
train_eval_dataloader = dict(dataset=dict(type='InShopDataset', data_root=data_root))
