# IRT Table 9 (paper R@1: 89.8): IRT_L DeiT-S on In-Shop with GeM (p = 3) of the patch tokens
# (after the final norm, CLS token left out) instead of the CLS token, 384-d.
_base_ = ['../irt-l_deit-s_1xb64-35k_inshop.py']

model = dict(neck=[dict(type='GeMPool', p=3.0)])
