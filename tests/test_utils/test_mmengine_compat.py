"""The MMEngine internals irtbox relies on (irtbox/utils/mmengine_compat.py) are still there and
still do what irtbox relies on: an MMEngine release that changes one fails here."""
import importlib
import inspect

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import CheckpointLoader, Runner

from irtbox.utils import mmengine_compat as compat
from irtbox.utils.config import SHIPPED_PREFIX, _base_path


@pytest.mark.parametrize('path, name, params', compat.OVERRIDDEN)
def test_the_private_methods_irtbox_overrides_keep_their_signature(path, name, params):
    module, cls = path.rsplit('.', 1)
    method = getattr(getattr(importlib.import_module(module), cls), name, None)
    assert method is not None, f'{path}.{name} is gone'
    assert tuple(inspect.signature(method).parameters) == params


def test_init_model_weights_initialises_the_model():
    model = torch.nn.Linear(2, 2)
    model.init_weights = lambda: setattr(model, 'initialised', True)
    runner = object.__new__(Runner)
    runner.model = model
    Runner._init_model_weights(runner)  # not distributed: its broadcast does nothing
    assert model.initialised


def test_base_entries_resolve_through_the_wrapped_get_cfg_path(tmp_path):
    """Config.fromfile resolves each _base_ entry with Config._get_cfg_path(cfg_path, filename)
    -> (path, scope): irtbox's prefix works only through it, and only within the block."""
    original = Config._get_cfg_path
    assert tuple(inspect.signature(original).parameters) == ('cfg_path', 'filename')
    (tmp_path / 'base.py').write_text('x = 1\n')
    child = tmp_path / 'child.py'
    child.write_text("_base_ = ['./base.py', "
                     f"'{SHIPPED_PREFIX}quickstart/irt-r_vit-tiny_1xb64-500_digits.py']\n")
    with compat.base_path_resolver(_base_path):
        assert Config._get_cfg_path.irtbox
        cfg = Config.fromfile(str(child))
    assert cfg.x == 1 and cfg.model.type
    assert Config._get_cfg_path is original  # MMEngine's own again: no process-wide patch
    with pytest.raises(Exception):
        Config.fromfile(str(child))


def test_checkpoint_schemes_are_restored(tmp_path):
    before = dict(CheckpointLoader._schemes)
    path = str(tmp_path / 'x.pth')
    torch.save({'a': torch.ones(1)}, path)
    with compat.checkpoint_loaders_restored():
        CheckpointLoader.register_scheme(prefixes='', force=True)(lambda f, m=None: {'ours': f})
        assert CheckpointLoader.load_checkpoint(path) == {'ours': path}
    assert dict(CheckpointLoader._schemes) == before
    assert list(CheckpointLoader._schemes) == list(before)  # the order decides the match
    assert torch.equal(CheckpointLoader.load_checkpoint(path)['a'], torch.ones(1))


def test_runner_state_irtbox_reads_and_sets():
    runner = object.__new__(Runner)
    runner._has_loaded = False
    assert not compat.has_loaded(runner)
    compat.set_has_loaded(runner)
    assert compat.has_loaded(runner)
    assert Runner.load_or_resume(runner) is None  # loads nothing more (no other state read)


def test_the_train_loop_iterator_is_wrapped_where_there_is_one():
    from mmengine.runner import IterBasedTrainLoop
    assert 'self.dataloader_iterator = _InfiniteDataloaderIterator' in \
        inspect.getsource(IterBasedTrainLoop.__init__)
    loop = type('Loop', (), {})()
    compat.wrap_train_iterator(loop, lambda it, n: (it, n), 3)
    assert not hasattr(loop, 'dataloader_iterator')  # an epoch-based loop: none
    loop.dataloader_iterator = 'batches'
    compat.wrap_train_iterator(loop, lambda it, n: (it, n), 3)
    assert loop.dataloader_iterator == ('batches', 3)


def test_the_public_names_the_mixins_route_to_are_free_in_mmengine():
    """A name MMEngine uses (CheckpointHook's save_best is an argument) would be shadowed."""
    from mmengine.hooks import CheckpointHook
    hook = CheckpointHook(save_best='auto')
    assert not any(hasattr(hook, name) for name in ('save_with_step', 'save_best_checkpoint'))
    assert not hasattr(Runner, 'init_model_weights')


def test_configs_parsed_once_parses_each_file_once_and_gives_the_same_configs(monkeypatch):
    import glob
    import os.path as osp
    from collections import Counter

    from irtbox.utils.config import CONFIGS_DIR
    paths = sorted(glob.glob(osp.join(CONFIGS_DIR, 'irt', '*.py')))[:8]
    parses = Counter()
    parse = Config.__dict__['_file2dict'].__func__
    monkeypatch.setattr(Config, '_file2dict', staticmethod(
        lambda filename, *a, **k: parses.update([filename]) or parse(filename, *a, **k)))
    plain = [Config.fromfile(path) for path in paths]
    plain_parses, parses = sum(parses.values()), Counter()
    with compat.configs_parsed_once():
        cached = [Config.fromfile(path) for path in paths]
        cached[0].model['changed'] = True  # a copy of its own: the next load is unchanged
        cached[0] = Config.fromfile(paths[0])
    # Each file (as named: MMEngine substitutes its folder in it) once; the bases were more.
    assert max(parses.values()) == 1 and sum(parses.values()) < plain_parses, parses
    assert 'changed' not in cached[0].model
    for a, b in zip(plain, cached):
        assert a.to_dict() == b.to_dict() and a.text == b.text and a.filename == b.filename
