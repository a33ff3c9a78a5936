# IRT_O on digits: the untrained (randomly initialised, seeded) ViT-Tiny, evaluated only.
# With ImageNet weights this would be the off-the-shelf model; here nothing can be downloaded.
_base_ = ['./irt-r_vit-tiny_1xb64-500_digits.py']

model = dict(head=None)
train_dataloader = None
train_cfg = None
optim_wrapper = None
param_scheduler = None
