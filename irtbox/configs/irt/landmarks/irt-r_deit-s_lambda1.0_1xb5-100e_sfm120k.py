# IRT Table 6: DeiT-S 224, KoLeo weight λ = 1.0.
_base_ = ['./irt-r_deit-s_1xb5-100e_sfm120k.py']

model = dict(head=dict(loss_weights=dict(koleo=1.0)))
