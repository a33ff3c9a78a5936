# The untrained digits model (random init, seeded), tested only: the "off-the-shelf" line of
# the tiny sweep's figures (nothing can be downloaded for a pretrained one).
_base_ = ['./dml_vit-tiny_multisimilarity_1xb40-320_digits.py']
model = dict(head=None)
train_dataloader = None
train_cfg = None
optim_wrapper = None
param_scheduler = None
custom_hooks = []
