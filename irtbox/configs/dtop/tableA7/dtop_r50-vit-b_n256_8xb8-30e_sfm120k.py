# DToP Table A7, descriptor dimension N = 256 (default 1536 = [y_perp; u] with no projection):
# a linear layer 1536 -> 256 after the global-local fusion; ArcFace and the whitening follow.
# Paper (SfM-120k): Oxf5k 87.4, Par6k 90.1, ROxf M/H 63.1 / 35.8, RPar M/H 80.2 / 62.2.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(
    neck=[dict(type='DToPNeck', in_channels=768, out_dim=256)],
    head=dict(losses=dict(arcface=dict(embed_dim=256))),
    whitening=dict(in_dim=256),
)
