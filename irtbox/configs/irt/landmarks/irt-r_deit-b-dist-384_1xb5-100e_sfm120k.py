# IRT Table 8: IRT_R with DeiT-B† at 384x384, 768-d (paper: ROxf M/H 55.1 / 28.3, RPar M/H 72.7 / 49.6).
# λ = 4.0 as the DeiT-S IRT_R (the paper does not give λ for this row).
_base_ = ['./irt-l_deit-b-dist-384_1xb5-100e_sfm120k.py']

model = dict(head=dict(losses=dict(koleo=dict(type='KoLeoLoss')), loss_weights=dict(koleo=4.0)))
