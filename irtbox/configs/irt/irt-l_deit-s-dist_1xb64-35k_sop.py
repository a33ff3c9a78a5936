# IRT_L with DeiT-S† (distilled pre-training; CLS token, 384-d) on SOP:
# the IRT_R recipe without the KoLeo term.
_base_ = ['./irt-r_deit-s-dist_1xb64-35k_sop.py']

model = dict(
    head=dict(
        losses=dict(_delete_=True, contrastive={{_base_.model.head.losses.contrastive}}),
        loss_weights=dict(_delete_=True)))
