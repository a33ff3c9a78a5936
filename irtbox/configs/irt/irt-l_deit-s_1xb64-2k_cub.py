# IRT_L with DeiT-S (CLS token, 384-d) on CUB-200-2011 (Tables 3, 9):
# the IRT_R recipe without the KoLeo term.
_base_ = ['./irt-r_deit-s_1xb64-2k_cub.py']

model = dict(
    head=dict(
        losses=dict(_delete_=True, contrastive={{_base_.model.head.losses.contrastive}}),
        loss_weights=dict(_delete_=True)))
