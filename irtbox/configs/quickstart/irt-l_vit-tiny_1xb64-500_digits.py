# IRT_L on digits: the IRT_R recipe without KoLeo (contrastive loss with memory only).
_base_ = ['./irt-r_vit-tiny_1xb64-500_digits.py']

model = dict(head=dict(losses=dict(_delete_=True, contrastive={{_base_.model.head.losses.contrastive}}),
                       loss_weights=dict(_delete_=True)))
