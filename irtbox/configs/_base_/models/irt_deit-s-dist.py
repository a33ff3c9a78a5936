# IRT with DeiT-S† (deit_small_distilled_patch16_224: ImageNet-1k pre-training with distillation
# from a convnet). The descriptor is the CLS token of the last layer, as in the paper (DistTokenPool
# would give the distillation token instead), 384-d; the head is DeiT-S's.
_base_ = ['./irt_deit-s.py']

model = dict(backbone=dict(model_name='deit_small_distilled_patch16_224'))
