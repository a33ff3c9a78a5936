# Short name of dtop_r50-vit-b_8xb8-30e_sfm120k.py (the DToP issue's example command:
#   tools/dist_train.sh configs/dtop/r50vitb_sfm.py 8).
_base_ = ['./dtop_r50-vit-b_8xb8-30e_sfm120k.py']
