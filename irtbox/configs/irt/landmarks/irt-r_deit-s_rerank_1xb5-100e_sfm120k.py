# irt-r_deit-s_1xb5-100e_sfm120k.py tested with and without re-ranking (k-reciprocal, diffusion,
# SuperGlobal: docs/methods/reranking.md); training is the same, so test its checkpoint:
#   tools/test.py configs/irt/landmarks/irt-r_deit-s_rerank_1xb5-100e_sfm120k.py CKPT
_base_ = [
    '../../_base_/models/irt_landmarks_deit-s.py', '../../_base_/datasets/sfm120k_tuples.py',
    '../../_base_/datasets/revisited_oxford_paris_rerank.py',
    '../../_base_/schedules/adam_100e_sfm120k.py'
]

model = dict(head=dict(loss_weights=dict(koleo=4.0)))
