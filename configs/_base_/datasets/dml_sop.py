# Stanford Online Products: 11,318 train classes, 11,316 test.
# Training-recipe benchmark: the training classes split by class, the first 80% of the sorted
# class ids train (9054 classes), the last 20% validate (2264); test on the test split
# (leave-one-out MAP@R and Precision@1).
_base_ = ['./dml_pipelines.py']
data_root = 'data/sop'
num_train_classes = 9054  # classes of the 80% part: the classifier size
# The training split, no pipeline (the wrapper has it).
inner_train = dict(type='SOPDataset', data_root=data_root, split='train')
# (no pipeline on the inner dataset: the wrapper has it)

train_dataloader = dict(
    batch_size=256,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='MPerClassSampler', batch_size=256, m=4, infinite=True),
    dataset=dict(type='BenchmarkSplitDataset', dataset=inner_train, part='train',
                 val_fraction=0.2, label_noise=0.0, class_fraction=1.0, seed=0,
                 pipeline={{_base_.train_pipeline}}),
)
val_dataloader = dict(
    batch_size=256,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='BenchmarkSplitDataset', dataset=inner_train, part='val',
                 val_fraction=0.2, pipeline={{_base_.test_pipeline}}),
)
test_dataloader = dict(
    batch_size=256,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='SOPDataset', data_root=data_root, split='test',
                 pipeline={{_base_.test_pipeline}}),
)
val_evaluator = dict(type='RetrievalMetric', ks=(1, ), map_at_r=False)
test_evaluator = dict(type='RetrievalMetric', ks=(1, ), map_at_r=True)
