# dtop_r50-vit-b_8xb8-30e_sfm120k.py tested with and without re-ranking (k-reciprocal, diffusion,
# SuperGlobal: docs/methods/reranking.md); training is the same, so test its checkpoint:
#   tools/test.py configs/dtop/dtop_r50-vit-b_rerank_8xb8-30e_sfm120k.py CKPT
_base_ = [
    '../_base_/models/dtop_r50-vit-b.py', '../_base_/datasets/sfm120k_group_size.py',
    '../_base_/datasets/revisited_dtop_rerank.py', '../_base_/schedules/sgd_cosine_dtop.py'
]
