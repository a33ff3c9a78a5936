# IRT_R with DeiT-B (CLS token, 768-d) on SOP.
# Contrastive loss (β 0.5) + 0.7 KoLeo, AdamW 3e-5, batch 64.
# Memory of the whole training set (59,551 entries); 35k iterations.
_base_ = [
    '../_base_/models/irt_deit-b.py', '../_base_/datasets/sop.py',
    '../_base_/schedules/adamw_35k.py', '../_base_/default_runtime.py'
]

model = dict(head=dict(losses=dict(contrastive=dict(memory_size={{_base_.train_size}}))))
