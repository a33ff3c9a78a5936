# DToP-R50+ViT-B trained on GLDv1-noisy (Google Landmarks v1:
# 1,225,029 images, 14,951 classes),
# 5 warm-up epochs (paper A.1), 30 epochs (ours, as on SfM-120k). Paper (Table A6b): 72.0
# = mean of ROxf / RPar Medium / Hard mAP.
#   tools/dist_train.sh configs/dtop/dtop_r50-vit-b_8xb8-30e_gldv1noisy.py 8
_base_ = ['./dtop_r50-vit-b_8xb8-30e_sfm120k.py']
num_classes = 14951
model = dict(head=dict(losses=dict(arcface=dict(num_classes=num_classes))))
train_dataloader = dict(
    dataset=dict(type='GLDv1NoisyDataset', data_root='data/gldv1noisy', skip_missing=True))
# skip_missing: the list holds URLs, some dead; rows without an image file are dropped.
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, begin=0, end=5,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min_ratio=1e-4, by_epoch=True, begin=5, end=30,
         T_max=25, convert_to_iter_based=True),
]
