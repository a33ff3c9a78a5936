# DToP Table A7, descriptor dimension N = 768 (default 1536 = [y_perp; u] with no projection):
# a linear layer 1536 -> 768 after the global-local fusion; ArcFace and the whitening follow.
# Paper (SfM-120k): Oxf5k 88.8, Par6k 91.8, ROxf M/H 67.5 / 41.7, RPar M/H 82.1 / 64.8.
_base_ = ['../dtop_r50-vit-b_8xb8-30e_sfm120k.py']
model = dict(
    neck=[dict(type='DToPNeck', in_channels=768, out_dim=768)],
    head=dict(losses=dict(arcface=dict(embed_dim=768))),
    whitening=dict(in_dim=768),
)
