# IRT_R with DeiT-S† ▷128 on CUB-200-2011 (no paper number: Table 2 has ▷128 for DeiT-S only).
# The 384-d IRT_R model, its CLS descriptor reduced to 128 components by a PCA learned on the
# training set (seen through the test pipeline), then L2-normalised. Training is at 384-d;
# PCAFitHook refits the PCA before each validation, before saving a checkpoint and, if the
# loaded checkpoint holds none, before testing.
_base_ = ['./irt-r_deit-s-dist_1xb64-2k_cub.py']

model = dict(neck=[dict(type='ClsTokenPool'), dict(type='PCAReduction', in_dim=384, out_dim=128)])
custom_hooks = [dict(type='PCAFitHook', dataloader={{_base_.train_eval_dataloader}})]
