# IRT Table 8 ▷128: IRT_R DeiT-B† 384 reduced to 128-d by PCA learned on SfM-120k
# (paper: ROxf M/H 49.1 / 21.1, RPar M/H 68.3 / 44.1).
_base_ = ['./irt-r_deit-b-dist-384_1xb5-100e_sfm120k.py']

model = dict(neck=[dict(type='ClsTokenPool'), dict(type='PCAReduction', in_dim=768, out_dim=128)])
custom_hooks = [{{_base_.mining_hook}},
                dict(type='PCAFitHook', dataloader={{_base_.sfm_whiten_dataloader}})]
