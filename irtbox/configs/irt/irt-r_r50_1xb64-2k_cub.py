# IRT_R with ResNet-50 (average pooling, 2048-d) on CUB-200-2011.
# Contrastive loss (β 0.5) + 0.7 KoLeo, AdamW 3e-5, batch 64.
# Memory of the whole training set (5,864 entries); 2k iterations.
_base_ = [
    '../_base_/models/irt_r50.py', '../_base_/datasets/cub.py',
    '../_base_/schedules/adamw_35k.py', '../_base_/default_runtime.py'
]

model = dict(head=dict(losses=dict(contrastive=dict(memory_size={{_base_.train_size}}))))
train_cfg = dict(max_iters=2000, val_interval=500)
