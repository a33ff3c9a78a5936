# IRT Table 7 / 8 ▷128: the IRT_L deit-b-dist-384 model reduced to 128-d by a PCA learned on SfM-120k
# (the whitening set's images, extracted at test time size).
_base_ = ['./irt-l_deit-b-dist-384_1xb5-100e_sfm120k.py']

model = dict(neck=[dict(type='ClsTokenPool'), dict(type='PCAReduction', in_dim=768, out_dim=128)])
custom_hooks = [{{_base_.mining_hook}},
                dict(type='PCAFitHook', dataloader={{_base_.sfm_whiten_dataloader}})]
