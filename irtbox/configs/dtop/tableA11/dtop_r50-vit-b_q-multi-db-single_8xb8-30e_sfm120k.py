# DToP Table A11, multi-scale queries and single-scale database (default: 3 scales, 1, 1/sqrt(2),
# 1/2, for both). Training is the default one: test its checkpoint with this config,
#   python tools/test.py THIS_CONFIG CHECKPOINT_OF_THE_DEFAULT_MODEL
# Paper (SfM-120k): Oxf5k 90.1, Par6k 92.5, ROxf M/H 68.6 / 43.1, RPar M/H 82.8 / 65.1.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(test_scales=(1.0, ), query_test_scales=(1.0, 0.7071, 0.5))
# The whitening is learned on descriptors extracted as the database's (test_scales): refit it
# when testing a checkpoint of the default model, whose whitening was learned at 3 scales.
custom_hooks = [
    dict(type='WhiteningFitHook',
         refit_on_test=True,
         dataloader=dict(batch_size=1, num_workers=8,
                         sampler=dict(type='DefaultSampler', shuffle=False),
                         dataset=dict(type='SfMWhitenDataset', data_root='data/sfm120k',
                                      pipeline=[
                                          dict(type='LoadImageFromFile'),
                                          dict(type='Resize', scale=(512, 512), keep_ratio=True),
                                          dict(type='PackRetrievalInputs'),
                                      ])))
]
