# IRT Table 5 (paper SOP R@1: 83.1): DeiT-S on SOP, margin β = 0.3, KoLeo weight λ = 0.7.
_base_ = ['../irt-r_deit-s_1xb64-35k_sop.py']

model = dict(
    head=dict(losses=dict(contrastive=dict(margin=0.3)), loss_weights=dict(koleo=0.7)))
