"""model_identity: the fingerprint an index keeps of the model that made it."""
import os.path as osp

import pytest

from irtbox.apis import init_model
from irtbox.apis.identity import model_identity, weights_digest
from irtbox.utils.config import load_config

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


@pytest.mark.slow
@pytest.mark.parametrize('config, preprocessing_sha256, dim', [
    ('configs/quickstart/irt-r_vit-tiny_1xb64-500_digits.py',
     '5a83f48e1f919d5d4a761860fd7167cadee4cd5c109e439947d9c26bdd38ca2b', 192),
    ('tests/data/configs/tiny_irt.py',
     'e0a7129854d354946c06e36b2b6161563e1b58cdd4e2c37f6af7d81329c300e9', 32),
])
def test_preprocessing_digest_is_the_one_indexes_hold(config, preprocessing_sha256, dim):
    """The digests the indexes built so far hold: the same model stays compatible with them."""
    identity = model_identity(init_model(osp.join(ROOT, config)))
    assert (identity['preprocessing_sha256'], identity['embedding_dim']) == (
        preprocessing_sha256, dim)


@pytest.mark.slow
def test_weights_digest_of_a_model_with_0d_buffers():
    """BatchNorm's num_batches_tracked is a 0-d tensor: hashed like the others."""
    cfg = load_config(osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py'))
    cfg.model.backbone = dict(type='TimmBackbone', model_name='resnet18', pretrained=False)
    cfg.model.neck, cfg.model.head = [dict(type='GeMPool')], None
    model = init_model(cfg)
    assert model_identity(model)['embedding_dim'] == 512
    before = weights_digest(model)
    model.backbone.model.bn1.num_batches_tracked += 1
    assert weights_digest(model) != before
