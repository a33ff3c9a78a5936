# Output-dimension factor (Fig. 7): a linear layer from the 768-d CLS token to 128-d, trained
# with the network. From the command line the same is
#   --cfg-options model.neck.1.out_dim=128 model.head.losses.metric.embedding_size=128
# for every loss (the classification losses size their weights with embedding_size; the
# others check it).
_base_ = ['./dml_dinov2-vit-b_multisimilarity_1xb256-39k_cub.py']
out_dim = 128
model = dict(neck=[dict(type='ClsTokenPool'),
                   dict(type='LinearProjection', in_dim={{_base_.embed_dim}}, out_dim=out_dim)],
             head=dict(losses=dict(metric=dict(embedding_size=out_dim))))
