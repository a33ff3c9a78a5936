# IRT_L with DeiT-B (CLS token, 768-d) on In-Shop:
# the IRT_R recipe without the KoLeo term.
_base_ = ['./irt-r_deit-b_1xb64-35k_inshop.py']

model = dict(
    head=dict(
        losses=dict(_delete_=True, contrastive={{_base_.model.head.losses.contrastive}}),
        loss_weights=dict(_delete_=True)))
