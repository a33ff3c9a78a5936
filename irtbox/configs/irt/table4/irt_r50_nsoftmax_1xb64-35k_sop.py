# IRT Table 4 (paper SOP R@1: 79.5): ResNet-50, 2048-d, trained with the normalized softmax
# loss (Zhai & Wu 2018) instead of the contrastive loss: one proxy per SOP training class
# (11,318), cosine logits / temperature 0.05. The proxies train with the model's AdamW
# (lr 3e-5, wd 5e-4); the paper gives no separate learning rate.
_base_ = ['../irt-l_r50_1xb64-35k_sop.py']

model = dict(
    head=dict(
        losses=dict(
            _delete_=True,
            nsoftmax=dict(
                type='NormalizedSoftmaxLoss', num_classes=11318, embed_dim=2048,
                temperature=0.05))))
