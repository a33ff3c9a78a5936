# IRT Table 4 (paper SOP R@1: 78.0): ResNet-50, 2048-d, trained with scalable NCA (Wu et al.
# 2018; temperature 0.05) instead of the contrastive loss, the neighbours being the batch
# and a memory of the whole training set (59,551 entries).
_base_ = ['../irt-l_r50_1xb64-35k_sop.py']

model = dict(
    head=dict(
        losses=dict(
            _delete_=True,
            snca=dict(
                type='ScalableNCALoss', temperature=0.05,
                memory_size={{_base_.train_size}}, embed_dim=2048))))
