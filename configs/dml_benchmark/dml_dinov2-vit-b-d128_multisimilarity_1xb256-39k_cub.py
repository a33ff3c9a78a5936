# Output-dimension factor (Fig. 7): a linear layer from the 768-d CLS token to 128-d, trained
# with the network. For a classification loss also set
# model.head.losses.metric.embedding_size to out_dim.
_base_ = ['./dml_dinov2-vit-b_multisimilarity_1xb256-39k_cub.py']
model = dict(neck=[dict(type='ClsTokenPool'), dict(type='LinearProjection', in_dim=768,
                                                   out_dim=128)])
