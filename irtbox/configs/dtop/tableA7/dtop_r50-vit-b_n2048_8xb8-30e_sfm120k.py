# DToP Table A7, descriptor dimension N = 2048 (default 1536 = [y_perp; u] with no projection):
# a linear layer 1536 -> 2048 after the global-local fusion; ArcFace and the whitening follow.
# Paper (SfM-120k): Oxf5k 89.3, Par6k 93.0, ROxf M/H 65.8 / 39.0, RPar M/H 82.9 / 65.8.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(
    neck=[dict(type='DToPNeck', in_channels=768, out_dim=2048)],
    head=dict(losses=dict(arcface=dict(embed_dim=2048))),
    whitening=dict(in_dim=2048),
)
