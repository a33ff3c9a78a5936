# DToP Table A7, descriptor dimension N = 512 (default 1536 = [y_perp; u] with no projection):
# a linear layer 1536 -> 512 after the global-local fusion; ArcFace and the whitening follow.
# Paper (SfM-120k): Oxf5k 88.0, Par6k 91.1, ROxf M/H 64.9 / 38.6, RPar M/H 82.1 / 64.7.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(
    neck=[dict(type='DToPNeck', in_channels=768, out_dim=512)],
    head=dict(losses=dict(arcface=dict(embed_dim=512))),
    whitening=dict(in_dim=512),
)
