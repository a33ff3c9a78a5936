# IRT Table 5 (paper SOP R@1: 82.5): DeiT-S on SOP, margin β = 0.3, λ = 0
# (no KoLeo term, i.e. IRT_L).
_base_ = ['../irt-l_deit-s_1xb64-35k_sop.py']

model = dict(head=dict(losses=dict(contrastive=dict(margin=0.3))))
