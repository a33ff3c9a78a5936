# Training-recipe benchmark data (Berton, Musgrave & Masone): the training classes split by
# class, the first 80% of the sorted class ids train, the last 20% validate; test on the test
# split (leave-one-out MAP@R and Precision@1). The dataset files (dml_cub.py, ...) set the
# dataset type and root of the three loaders and the classifier size `num_train_classes`.
_base_ = ['./dml_pipelines.py']

train_dataloader = dict(
    batch_size=256,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='MPerClassSampler', batch_size=256, m=4, infinite=True),
    # The wrapper holds the pipeline; the inner training split has none.
    dataset=dict(type='BenchmarkSplitDataset', dataset=dict(split='train'), part='train',
                 val_fraction=0.2, label_noise=0.0, class_fraction=1.0, seed=0,
                 pipeline={{_base_.train_pipeline}}),
)
val_dataloader = dict(
    batch_size=256,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='BenchmarkSplitDataset', dataset=dict(split='train'), part='val',
                 val_fraction=0.2, pipeline={{_base_.test_pipeline}}),
)
test_dataloader = dict(
    batch_size=256,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(split='test', pipeline={{_base_.test_pipeline}}),
)
# Precision@1 (queries without another image of their class dropped, Musgrave et al.) comes
# with MAP@R; the early-stopping hook monitors it.
val_evaluator = dict(type='RetrievalMetric', ks=(), map_at_r=True)
test_evaluator = dict(type='RetrievalMetric', ks=(1, ), map_at_r=True)
