# IRT_R with ResNet-50 (average pooling, 2048-d) on In-Shop.
# Contrastive loss (β 0.5) + 0.7 KoLeo, AdamW 3e-5, batch 64.
# Memory of 0.2 x 25,882 = 5,176 entries, filled by a momentum encoder (0.999);
# 35k iterations.
_base_ = [
    '../_base_/models/irt_r50.py', '../_base_/datasets/inshop.py',
    '../_base_/schedules/adamw_35k.py', '../_base_/default_runtime.py'
]

model = dict(momentum=0.999, head=dict(losses=dict(contrastive=dict(memory_size=5176))))
