# DToP Table A7, descriptor dimension N = 1024 (default 1536 = [y_perp; u] with no projection):
# a linear layer 1536 -> 1024 after the global-local fusion; ArcFace and the whitening follow.
# Paper (SfM-120k): Oxf5k 86.3, Par6k 92.7, ROxf M/H 64.4 / 38.4, RPar M/H 83.1 / 66.5.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(
    neck=[dict(type='DToPNeck', in_channels=768, out_dim=1024)],
    head=dict(losses=dict(arcface=dict(embed_dim=1024))),
    whitening=dict(in_dim=1024),
)
