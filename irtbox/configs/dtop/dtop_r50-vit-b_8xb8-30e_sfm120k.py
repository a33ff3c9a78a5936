# DToP-R50+ViT-B trained on SfM-120k (3D-model ids as classes), 8 processes x 8 images = batch 64,
# warm-up 3 epochs. Test: ROxford5k / RParis6k Medium and Hard, 3 scales, with and without the
# learned whitening. Paper (SfM-120k, full model): ROxf M/H 68.5 / 43.0, RPar M/H 83.1 / 65.8.
#   tools/dist_train.sh configs/dtop/dtop_r50-vit-b_8xb8-30e_sfm120k.py 8
_base_ = [
    '../_base_/models/dtop_r50-vit-b.py', '../_base_/datasets/sfm120k_group_size.py',
    '../_base_/datasets/revisited_dtop.py', '../_base_/schedules/sgd_cosine_dtop.py'
]
