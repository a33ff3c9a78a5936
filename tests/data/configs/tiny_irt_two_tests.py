# tiny_irt evaluated on two test sets in one run (the SOP and CUB fixtures).
_base_ = ['./tiny_irt.py']

test_dataloader = [
    {{_base_.test_dataloader}},
    dict(batch_size=4, num_workers=0, sampler=dict(type='DefaultSampler', shuffle=False),
         dataset=dict(type='CUBDataset', data_root='tests/data/cub', split='test',
                      pipeline={{_base_.pipeline}})),
]
test_evaluator = [dict(type='RetrievalMetric', ks=(1, 2), prefix='sop'),
                  dict(type='RetrievalMetric', ks=(1,), prefix='cub')]
test_cfg = dict(type='MultiDatasetTestLoop')
