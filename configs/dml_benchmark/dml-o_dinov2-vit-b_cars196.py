# The off-the-shelf DINOv2 ViT-B/14 (CLS, 768-d, 224 x 224), tested only: the horizontal line
# of the benchmark's figures.
_base_ = ['./dml_dinov2-vit-b_multisimilarity_1xb256-39k_cars196.py']
model = dict(head=None)
train_dataloader = None
train_cfg = None
optim_wrapper = None
param_scheduler = None
custom_hooks = []
