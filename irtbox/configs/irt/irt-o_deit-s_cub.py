# IRT_O with DeiT-S on CUB-200-2011 (Table 3): the off-the-shelf ImageNet-1k DeiT-S (timm weights),
# CLS token of the last layer, L2-normalised, 384-d. No training: evaluate with
#   python tools/test.py configs/irt/irt-o_deit-s_cub.py
_base_ = [
    '../_base_/models/irt_deit-s.py', '../_base_/datasets/cub.py', '../_base_/default_runtime.py'
]

model = dict(head=None)
train_dataloader = None
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
