# What the category-level datasets (CUB, SOP, In-Shop) share: 224 x 224 pipelines, M-per-class
# training batches (64 = 16 classes x 4 images), sequential test batches, and the training set
# seen in test mode. cub.py, sop.py and inshop.py add each loader's dataset type and data_root,
# the training set size and the Recall@k of their paper.
_base_ = ['./pipelines_224.py']

train_dataloader = dict(
    batch_size=64,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='MPerClassSampler', batch_size=64, m=4, infinite=True),
    dataset=dict(split='train', pipeline={{_base_.train_pipeline}}),
)
val_dataloader = dict(
    batch_size=128,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(split='test', pipeline={{_base_.test_pipeline}}),
)
test_dataloader = val_dataloader
# The training set seen in test mode (PCA fitting for the ▷128 variants).
train_eval_dataloader = dict(
    batch_size=128,
    num_workers=8,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(split='train', pipeline={{_base_.test_pipeline}}),
)
