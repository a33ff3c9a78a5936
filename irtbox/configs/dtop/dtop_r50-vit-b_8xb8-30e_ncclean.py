# DToP-R50+ViT-B trained on NC-clean (Gordo et al.'s cleaned Neural-Codes landmarks;
# the paper's copy: 27,965 images, 581 classes),
# no warm-up (paper A.1), 30 epochs (ours, as on SfM-120k). Paper (Table A6b): 62.8
# = mean of ROxf / RPar Medium / Hard mAP.
#   tools/dist_train.sh configs/dtop/dtop_r50-vit-b_8xb8-30e_ncclean.py 8
_base_ = ['./dtop_r50-vit-b_8xb8-30e_sfm120k.py']
num_classes = 581
model = dict(head=dict(losses=dict(arcface=dict(num_classes=num_classes))))
train_dataloader = dict(
    dataset=dict(type='NCCleanDataset', data_root='data/ncclean', skip_missing=True))
# skip_missing: the list holds URLs, some dead; rows without an image file are dropped.
param_scheduler = [
    dict(type='CosineAnnealingLR', eta_min_ratio=1e-4, by_epoch=True, begin=0, end=30, T_max=30,
         convert_to_iter_based=True),
]
