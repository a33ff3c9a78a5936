# DToP Table A7, descriptor dimension N = 128 (default 1536 = [y_perp; u] with no projection):
# a linear layer 1536 -> 128 after the global-local fusion; ArcFace and the whitening follow.
# Paper (SfM-120k): Oxf5k 80.7, Par6k 89.1, ROxf M/H 56.7 / 29.6, RPar M/H 78.5 / 59.3.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(
    neck=[dict(type='DToPNeck', in_channels=768, out_dim=128)],
    head=dict(losses=dict(arcface=dict(embed_dim=128))),
    whitening=dict(in_dim=128),
)
