# tiny_irt with a PCA reduction to 8 dimensions learned on the training split.
_base_ = ['./tiny_irt.py']

model = dict(neck=[dict(type='ClsTokenPool'), dict(type='PCAReduction', in_dim=32, out_dim=8)])
custom_hooks = [
    dict(type='PCAFitHook',
         dataloader=dict(
             batch_size=4, num_workers=0, sampler=dict(type='DefaultSampler', shuffle=False),
             dataset=dict(type='SOPDataset', data_root='tests/data/sop', split='train',
                          pipeline={{_base_.pipeline}})))
]
