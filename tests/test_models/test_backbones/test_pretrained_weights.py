"""Pretrained backbone weights survive initialisation, are fetched once per job and fail in
one clear line."""
import logging
import socket

import pytest
import torch
from mmengine.logging import MMLogger

from irtbox.models.backbones import PretrainedWeightsUnavailable, TimmBackbone, create_timm_model
from irtbox.models.backbones import pretrained as pretrained_module
from irtbox.registry import MODELS
from irtbox.utils.checkpoint import state_digest

TINY = dict(img_size=32, patch_size=8, depth=1, embed_dim=32, num_heads=2)
HUB_NAME = 'deit_tiny_patch16_224.fb_in1k'


def constant_checkpoint(path, value=0.25):
    """A timm state dict of the tiny ViT whose every float tensor is ``value``."""
    import timm
    state = timm.create_model('vit_tiny_patch16_224', num_classes=0, **TINY).state_dict()
    torch.save({k: torch.full_like(v, value) for k, v in state.items()}, path)
    return str(path)


def hub_cache(root, monkeypatch, model_name=HUB_NAME, **kwargs):
    """A Hugging Face cache under ``root`` holding ``timm/<model_name>``'s model.safetensors
    (seeded random weights of the model built with ``kwargs``), read offline; returns them."""
    import timm
    from huggingface_hub import constants
    from safetensors.torch import save_file
    torch.manual_seed(7)
    state = timm.create_model(model_name, pretrained=False, **kwargs).state_dict()
    state = {k: torch.randn_like(v) for k, v in state.items()}
    repo = root / 'hub' / f"models--timm--{model_name}"
    commit = 'a' * 40
    (repo / 'refs').mkdir(parents=True)
    (repo / 'refs' / 'main').write_text(commit)
    (repo / 'snapshots' / commit).mkdir(parents=True)
    save_file(state, str(repo / 'snapshots' / commit / 'model.safetensors'))
    monkeypatch.setattr(constants, 'HF_HUB_CACHE', str(root / 'hub'))
    monkeypatch.setattr(constants, 'HF_HUB_OFFLINE', True)
    return state


def build_retriever(backbone, momentum=None):
    return MODELS.build(dict(
        type='ImageRetriever', backbone=backbone, neck=[dict(type='ClsTokenPool')],
        momentum=momentum))


def test_checkpoint_weights_survive_init_weights(tmp_path):
    """The issue's reproduction: a backbone checkpoint of all 0.25 is kept by the runner's
    ``init_weights()`` (timm's own init re-drew every tensor before the fix), and the momentum
    encoder starts equal to the online encoder."""
    ckpt = constant_checkpoint(tmp_path / 'bb.pth')
    model = build_retriever(dict(type='TimmBackbone', model_name='vit_tiny_patch16_224',
                                 checkpoint=ckpt, **TINY), momentum=0.99)
    model.init_weights()
    state = model.backbone.model.state_dict()
    assert all(bool((v == 0.25).all()) for v in state.values())
    for (name, online), momentum in zip(model.backbone.state_dict().items(),
                                        model.momentum_encoder['backbone'].state_dict().values()):
        assert torch.equal(online, momentum), name


def test_random_backbone_is_still_initialised_by_timm():
    """Without pretrained weights, init_weights keeps doing timm's initialisation."""
    backbone = TimmBackbone('vit_tiny_patch16_224', **TINY)
    with torch.no_grad():
        backbone.model.pos_embed.fill_(3.0)
    backbone.init_weights()
    assert not bool((backbone.model.pos_embed == 3.0).all())
    assert backbone.weights_source == 'random initialisation'


def test_hub_weights_survive_init_weights_and_are_logged(tmp_path, monkeypatch):
    """``pretrained=True`` through timm's real download path (an offline cache): the weights
    are the cached ones after init_weights, and the log names them with their digest."""
    expected = hub_cache(tmp_path, monkeypatch, **TINY)
    backbone = TimmBackbone(HUB_NAME, pretrained=True, **TINY)
    logger = MMLogger.get_instance('test_pretrained_log', log_level='INFO')
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    backbone.init_weights()
    logger.removeHandler(handler)
    state = backbone.model.state_dict()
    for key, value in expected.items():
        if key in state:
            torch.testing.assert_close(state[key], value, rtol=0, atol=0)
    message = ' '.join(r.getMessage() for r in records)
    assert f'timm/{HUB_NAME}' in message
    assert state_digest(backbone.state_dict())[:16] in message


def test_digest_tells_weights_apart():
    a = {'w': torch.zeros(3), 'b': torch.ones(2, dtype=torch.bfloat16)}
    b = {'w': torch.zeros(3), 'b': torch.ones(2, dtype=torch.bfloat16)}
    assert state_digest(a) == state_digest(b)
    b['w'][1] = 1e-8
    assert state_digest(a) != state_digest(b)
    assert state_digest({'w': torch.zeros(2, 3)}) != state_digest({'w': torch.zeros(3, 2)})


def test_missing_download_is_one_line_with_the_ways_out(tmp_path, monkeypatch):
    from huggingface_hub import constants
    monkeypatch.setattr(constants, 'HF_HUB_CACHE', str(tmp_path / 'empty'))
    monkeypatch.setattr(constants, 'HF_HUB_OFFLINE', True)
    with pytest.raises(PretrainedWeightsUnavailable) as info:
        TimmBackbone(HUB_NAME, pretrained=True, **TINY)
    message = str(info.value)
    assert '\n' not in message
    for part in (HUB_NAME, str(tmp_path / 'empty'), 'HF_HUB_OFFLINE=1',
                 'model.backbone.checkpoint=PATH', 'model.backbone.pretrained=False'):
        assert part in message


def test_one_source_of_weights(tmp_path):
    with pytest.raises(ValueError, match='one source of weights'):
        TimmBackbone('vit_tiny_patch16_224', pretrained=True,
                     init_cfg=dict(type='Pretrained', checkpoint='x.pth'), **TINY)


class FakeDist:
    """mmengine.dist as seen by rank ``rank`` of a job of ``world`` ranks; ``said`` is what
    every rank contributes to the all-gather (this rank's own entry is what it sends)."""

    def __init__(self, rank, world=2, said=None):
        self.rank, self.world = rank, world
        self.said = list(said) if said is not None else [None] * world
        self.sent = []

    def get_world_size(self):
        return self.world

    def get_rank(self):
        return self.rank

    def all_gather_object(self, obj):
        self.sent.append(obj)
        return [obj if r == self.rank else m for r, m in enumerate(self.said)]


def test_each_nodes_local_rank_zero_downloads_and_tells_the_others(monkeypatch):
    """Two nodes of 2 ranks: ranks 0 and 2 (LOCAL_RANK 0) download, ranks 1 and 3 wait and
    read their node's cache offline. Before: only global rank 0 downloaded, and rank 2 on
    the second node read its own empty cache offline and failed."""
    from huggingface_hub import constants
    calls = []

    def create(name, pretrained, **kwargs):
        calls.append((name, pretrained, constants.HF_HUB_OFFLINE))
        return torch.nn.Linear(1, 1)

    monkeypatch.setattr(constants, 'HF_HUB_OFFLINE', False)
    monkeypatch.setattr(pretrained_module, 'hub_unreachable', lambda: None)  # a network
    for rank, local_rank, offline in ((0, 0, False), (1, 1, True), (2, 0, False),
                                      (3, 1, True)):
        monkeypatch.setenv('LOCAL_RANK', str(local_rank))
        fake = FakeDist(rank, world=4)
        monkeypatch.setattr(pretrained_module, 'mmdist', fake)
        create_timm_model('m', True, create=create)
        assert calls[-1] == ('m', True, offline) and fake.sent == [None], rank
    assert constants.HF_HUB_OFFLINE is False  # the flag restored


def test_a_failed_download_reaches_every_rank_without_a_download(monkeypatch):
    def failing(name, pretrained, **kwargs):
        raise OSError('Name or service not known\nmore lines')

    monkeypatch.setattr(pretrained_module, 'hub_unreachable', lambda: None)
    monkeypatch.setenv('LOCAL_RANK', '0')
    rank0 = FakeDist(0)
    monkeypatch.setattr(pretrained_module, 'mmdist', rank0)
    with pytest.raises(PretrainedWeightsUnavailable, match='Name or service not known') as info:
        create_timm_model('m', True, create=failing)
    assert '\n' not in str(info.value) and rank0.sent == [str(info.value)]

    def must_not_run(*args, **kwargs):
        raise AssertionError('rank 1 must not try the hub after rank 0 failed')

    monkeypatch.setenv('LOCAL_RANK', '1')
    monkeypatch.setattr(pretrained_module, 'mmdist', FakeDist(1, said=['rank 0 said no', None]))
    with pytest.raises(PretrainedWeightsUnavailable, match=r'\(rank 0\) rank 0 said no'):
        create_timm_model('m', True, create=must_not_run)


def test_a_rank_that_cannot_read_its_nodes_cache_says_so(monkeypatch):
    def offline_miss(name, pretrained, **kwargs):
        raise OSError('not in the cache')

    monkeypatch.setenv('LOCAL_RANK', '1')
    monkeypatch.setattr(pretrained_module, 'mmdist', FakeDist(1))
    with pytest.raises(PretrainedWeightsUnavailable,
                       match=r"^\(rank 1\) this node's local rank 0 got the weights.*share"):
        create_timm_model('m', True, create=offline_miss)


def test_without_a_network_only_the_cache_is_read_and_the_error_says_so(tmp_path,
                                                                       monkeypatch):
    """The hub does not answer: the cache is read offline at once (huggingface_hub would
    retry for about 25 s a file), and the error says the hub cannot be reached."""
    from huggingface_hub import constants
    with socket.socket() as s:  # a port of 127.0.0.1 that nothing listens on
        s.bind(('127.0.0.1', 0))
        closed = f'http://127.0.0.1:{s.getsockname()[1]}'
    monkeypatch.setattr(constants, 'ENDPOINT', closed)
    monkeypatch.setattr(constants, 'HF_HUB_OFFLINE', False)
    monkeypatch.setattr(constants, 'HF_HUB_CACHE', str(tmp_path / 'empty'))
    assert pretrained_module.hub_unreachable().startswith(f'{closed}: ConnectError')
    offline = []

    def create(name, pretrained, **kwargs):
        offline.append(constants.HF_HUB_OFFLINE)
        raise OSError('not in the cache')
    with pytest.raises(PretrainedWeightsUnavailable) as info:
        create_timm_model('m', True, create=create)
    assert offline == [True] and constants.HF_HUB_OFFLINE is False
    assert str(info.value).startswith(
        f"cannot get timm's pretrained weights of 'm': the Hugging Face hub cannot be reached "
        f'({closed}: ConnectError')
    assert f"not in the cache {tmp_path / 'empty'} (OSError: not in the cache)" in str(info.value)
