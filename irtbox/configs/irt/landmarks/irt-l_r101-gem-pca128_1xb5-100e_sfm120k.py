# IRT Table 7 ▷128: irt-l_r101-gem_1xb5-100e_sfm120k reduced to 128-d by PCA learned on SfM-120k.
_base_ = ['./irt-l_r101-gem_1xb5-100e_sfm120k.py']

model = dict(neck=[dict(type='GeMPool', p=3.0), dict(type='PCAReduction', in_dim=2048, out_dim=128)])
custom_hooks = [{{_base_.mining_hook}},
                dict(type='PCAFitHook', dataloader={{_base_.sfm_whiten_dataloader}})]
