"""Refactoring guard: fixed models give the same embeddings and losses as when the snapshot was taken.

Each model below (the quick-start configs, the tiny test configs and hand-built models that cover
every neck, loss family, the cross-batch memory, the momentum encoder, GeM multi-scale and
whitening) gets parameters drawn from a generator seeded by the parameter's *name* (N(0, 1/fan_in);
constant inits kept), so the values do not depend on construction order. The embeddings of a
fixed batch (eval mode) and the loss terms of two training steps (the second one reads the
cross-batch memory the first one filled) must equal those stored in
``tests/data/snapshots/model_outputs.npz``, and the state-dict keys must not change (old
checkpoints keep loading).

Regenerate only when a change of results is intended::

    python tests/test_models/test_embedding_snapshot.py --regenerate
"""
import os.path as osp
import sys
import zlib

import numpy as np
import pytest
import torch
from mmengine.config import Config

from irtbox.registry import MODELS
from irtbox.structures import DataSample
from irtbox.apis import register_all_modules

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SNAPSHOT = osp.join(ROOT, 'tests', 'data', 'snapshots', 'model_outputs.npz')

_VIT = dict(type='TimmBackbone', model_name='vit_tiny_patch16_224', pretrained=False,
            img_size=32, patch_size=8, depth=2, embed_dim=32, num_heads=2)


def _hand_built():
    """Models that no tiny config covers, each a plain model dict."""
    def vit_model(neck, losses, **kwargs):
        return dict(type='ImageRetriever', backbone=dict(_VIT), neck=neck,
                    head=dict(type='EmbeddingHead', losses=losses), **kwargs)

    cls = [dict(type='ClsTokenPool')]
    models = {
        'snca_memory': vit_model(cls, dict(snca=dict(type='ScalableNCALoss', memory_size=6,
                                                     embed_dim=32))),
        'momentum_memory': vit_model(
            cls, dict(contrastive=dict(type='ContrastiveLoss', margin=0.5, memory_size=6,
                                       embed_dim=32)), momentum=0.9),
        'arcface_native': vit_model(cls, dict(arcface=dict(type='ArcFaceLoss', num_classes=3,
                                                           embed_dim=32))),
        'normsoftmax_native': vit_model(
            cls, dict(ns=dict(type='NormalizedSoftmaxLoss', num_classes=3, embed_dim=32))),
        'dist_token_pca': dict(
            type='ImageRetriever',
            backbone=dict(_VIT, model_name='deit_tiny_distilled_patch16_224'),
            neck=[dict(type='DistTokenPool'), dict(type='PCAReduction', in_dim=32, out_dim=16)],
            head=dict(type='EmbeddingHead', losses=dict(
                contrastive=dict(type='ContrastiveLoss', margin=0.5)))),
        'gem_multiscale': dict(
            type='ImageRetriever',
            backbone=dict(type='TimmBackbone', model_name='resnet18', pretrained=False),
            neck=[dict(type='GeMPool')], multi_scale_power='gem', test_scales=(1.0, 0.75),
            head=dict(type='EmbeddingHead', losses=dict(
                tuple=dict(type='ContrastiveLoss', margin=0.5)))),
        'rmac_projection': dict(
            type='ImageRetriever',
            backbone=dict(type='TimmBackbone', model_name='resnet18', pretrained=False),
            neck=[dict(type='RMACPool'), dict(type='LinearProjection', in_dim=512, out_dim=24)],
            head=dict(type='EmbeddingHead', losses=dict(
                contrastive=dict(type='ContrastiveLoss', margin=0.5)))),
    }
    for name in ('ArcFaceLoss', 'NormalizedSoftmaxLoss', 'ContrastiveLoss', 'MultiSimilarityLoss',
                 'ProxyAnchorLoss', 'SoftTripleLoss'):
        metric = dict(type='PMLLoss', name=name, embedding_size=32)
        if name in ('ArcFaceLoss', 'NormalizedSoftmaxLoss', 'ProxyAnchorLoss', 'SoftTripleLoss'):
            metric['num_classes'] = 3
        models[f'pml_{name}'] = vit_model(
            [dict(type='ClsTokenPool'), dict(type='LinearProjection', in_dim=32, out_dim=None)],
            dict(metric=metric))
    return models


def _from_config(path):
    cfg = Config.fromfile(osp.join(ROOT, path))
    return cfg.model.to_dict() if hasattr(cfg.model, 'to_dict') else dict(cfg.model)


def model_cases():
    cases = {
        'quickstart_irt-o': _from_config('configs/quickstart/irt-o_vit-tiny_digits.py'),
        'quickstart_irt-l': _from_config('configs/quickstart/irt-l_vit-tiny_1xb64-500_digits.py'),
        'quickstart_irt-r': _from_config('configs/quickstart/irt-r_vit-tiny_1xb64-500_digits.py'),
        'tiny_irt': _from_config('tests/data/configs/tiny_irt.py'),
        'tiny_dtop': _from_config('tests/data/configs/tiny_dtop.py'),
        'dml_digits': _from_config('configs/dml_benchmark/digits/dml_vit-tiny_multisimilarity_1xb40-320_digits.py'),
    }
    cases.update(_hand_built())
    return cases


def _seeded_like(name: str, t: torch.Tensor) -> torch.Tensor:
    """Constant inits (norm scales, biases, GeM's p) are kept; the rest drawn N(0, 1/fan_in)."""
    if t.numel() < 2 or bool((t == t.flatten()[0]).all()):
        return t.clone()
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    std = t[0].numel() ** -0.5 if t.dim() >= 2 else 0.02
    return (std * torch.randn(t.shape, generator=g, dtype=torch.float64)).to(t.dtype)


def _input_size(model_cfg):
    backbone = model_cfg['backbone']
    size = backbone.get('img_size', 64)
    return size if isinstance(size, int) else size[0]


def run_case(model_cfg) -> dict:
    """The case's outputs: eval embeddings, two steps of loss terms, the state-dict keys."""
    register_all_modules()
    model = MODELS.build(model_cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(_seeded_like(name, p))
        for name, m in model.named_modules():
            if hasattr(m, 'set_projection'):  # PCA / whitening buffers, learned after training
                g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
                m.set_projection(0.1 * torch.randn(m.in_dim, generator=g),
                                 torch.randn(m.out_dim, m.in_dim, generator=g) / m.in_dim ** 0.5)
    size = _input_size(model_cfg)
    g = torch.Generator().manual_seed(0)
    inputs = torch.randn(6, 3, size, size, generator=g)
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    samples = [DataSample().set_gt_label(int(y)) for y in labels]
    out = {'keys': np.array(sorted(model.state_dict().keys()))}
    model.eval()
    with torch.no_grad():
        out['embedding'] = model(inputs, mode='tensor').numpy()
    if model_cfg.get('head') is None:
        return out
    model.train()
    torch.manual_seed(0)
    for step in range(2):
        losses = model(inputs[step:] if step else inputs, samples[step:] if step else samples,
                       mode='loss')
        for key, value in sorted(losses.items()):
            out[f'step{step}/{key}'] = value.detach().numpy()
    return out


@pytest.fixture(scope='module')
def snapshot():
    if not osp.exists(SNAPSHOT):
        pytest.fail(f'{SNAPSHOT} is missing: run this file with --regenerate')
    with np.load(SNAPSHOT) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.slow
@pytest.mark.parametrize('case', sorted(model_cases()))
def test_outputs_unchanged(case, snapshot):
    stored = {k.split('::', 1)[1]: v for k, v in snapshot.items() if k.split('::', 1)[0] == case}
    assert stored, f'no snapshot for {case}: regenerate'
    got = run_case(model_cases()[case])
    assert list(got['keys']) == list(stored['keys']), 'state-dict keys changed'
    assert sorted(got) == sorted(stored), 'different outputs or loss terms'
    for key in got:
        if key != 'keys':
            np.testing.assert_allclose(got[key], stored[key], rtol=1e-5, atol=1e-6, err_msg=key)


def _regenerate():
    arrays = {}
    for case, cfg in sorted(model_cases().items()):
        for key, value in run_case(cfg).items():
            arrays[f'{case}::{key}'] = value
    np.savez_compressed(SNAPSHOT, **arrays)
    print(f'wrote {len(arrays)} arrays to {SNAPSHOT}')


if __name__ == '__main__':
    if '--regenerate' not in sys.argv:
        sys.exit(__doc__)
    _regenerate()
