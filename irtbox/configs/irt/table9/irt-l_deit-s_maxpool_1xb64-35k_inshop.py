# IRT Table 9 (paper R@1: 90.3): IRT_L DeiT-S on In-Shop with the maximum over the patch tokens
# (after the final norm, CLS token left out) instead of the CLS token, 384-d.
_base_ = ['../irt-l_deit-s_1xb64-35k_inshop.py']

model = dict(neck=[dict(type='MaxPool')])
