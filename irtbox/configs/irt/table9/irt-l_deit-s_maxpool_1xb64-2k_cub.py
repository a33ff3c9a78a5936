# IRT Table 9 (paper R@1: 69.2): IRT_L DeiT-S on CUB-200-2011 with the maximum over the patch tokens
# (after the final norm, CLS token left out) instead of the CLS token, 384-d.
_base_ = ['../irt-l_deit-s_1xb64-2k_cub.py']

model = dict(neck=[dict(type='MaxPool')])
