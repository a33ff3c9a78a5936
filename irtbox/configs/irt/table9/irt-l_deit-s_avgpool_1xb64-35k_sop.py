# IRT Table 9 (paper R@1: 83.0): IRT_L DeiT-S on SOP with the average of the patch tokens
# (after the final norm, CLS token left out) instead of the CLS token, 384-d.
_base_ = ['../irt-l_deit-s_1xb64-35k_sop.py']

model = dict(neck=[dict(type='AvgPool')])
