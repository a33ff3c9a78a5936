# IRT Table 5 (paper SOP R@1: 79.8): ResNet-50 on SOP, margin β = 0.5, λ = 0
# (no KoLeo term, i.e. IRT_L).
_base_ = ['../irt-l_r50_1xb64-35k_sop.py']

model = dict(head=dict(losses=dict(contrastive=dict(margin=0.5))))
