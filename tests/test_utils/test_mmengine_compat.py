"""The MMEngine internals irtbox relies on (irtbox/utils/mmengine_compat.py) are still there and
still do what irtbox relies on: an MMEngine release that changes one fails here."""
import importlib
import inspect

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import CheckpointLoader, Runner

from irtbox.utils import mmengine_compat as compat
from irtbox.utils.config import SHIPPED_PREFIX


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
    -> (path, scope): irtbox's prefix works only through it."""
    assert tuple(inspect.signature(Config._get_cfg_path).parameters) == ('cfg_path', 'filename')
    assert Config._get_cfg_path.irtbox
    (tmp_path / 'base.py').write_text('x = 1\n')
    child = tmp_path / 'child.py'
    child.write_text("_base_ = ['./base.py', "
                     f"'{SHIPPED_PREFIX}quickstart/irt-r_vit-tiny_1xb64-500_digits.py']\n")
    cfg = Config.fromfile(str(child))
    assert cfg.x == 1 and cfg.model.type


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
    compat.set_experiment_name(runner, 'named')
    assert runner.experiment_name == 'named'  # MMEngine's public property reads it
    runner._has_loaded = False
    assert not compat.has_loaded(runner)
    compat.set_has_loaded(runner)
    assert compat.has_loaded(runner)
    assert Runner.load_or_resume(runner) is None  # loads nothing more (no other state read)
