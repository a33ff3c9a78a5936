"""The grid specs under configs/**/sweeps/ load (irtbox.ops.sweeps), name existing configs, and each
factor option sets a key that the config really has (a typo would otherwise add a new,
ignored key through --cfg-options)."""
import functools
import glob
import os.path as osp

import pytest
from mmengine.config import Config

from irtbox.ops import sweeps

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SPECS = sorted(osp.relpath(p, ROOT)
               for p in glob.glob(osp.join(ROOT, 'configs', '**', 'sweeps', '*.py'),
                                  recursive=True))
# Keys an option may add: PMLLoss takes embedding_size for every loss (and checks it) but the
# contrastive configs leave it unset.
MAY_ADD = {'embedding_size'}


@functools.lru_cache(maxsize=None)
def load(path):
    return Config.fromfile(osp.join(ROOT, path))


def lookup(cfg, dotted):
    """The value at a --cfg-options key (list items by index), or KeyError."""
    node = cfg
    for part in dotted.split('.'):
        if isinstance(node, (list, tuple)):
            node = node[int(part)]
        elif part in node:
            node = node[part]
        else:
            raise KeyError(part)
    return node


def test_specs_found():
    assert osp.join('configs', 'dml_benchmark', 'sweeps', 'digits_tiny.py') in SPECS
    assert osp.join('configs', 'dml_benchmark', 'sweeps', 'berton2023_figs4-10.py') in SPECS


@pytest.mark.slow
@pytest.mark.parametrize('spec_path', SPECS)
def test_spec_runs_name_real_configs_and_keys(spec_path):
    spec = sweeps.load_spec(osp.join(ROOT, spec_path))
    runs = sweeps.expand(spec, 'W')
    assert runs
    checked = set()
    for run in runs:
        assert osp.isfile(osp.join(ROOT, run.config)), f'{spec_path}: {run.config} not found'
        for option in run.options:
            key, value = option.split('=', 1)
            if (run.config, key) in checked:
                continue
            checked.add((run.config, key))
            cfg = load(run.config)
            parent, _, last = key.rpartition('.')
            lookup(cfg, parent)  # the parent always exists
            if last not in MAY_ADD:
                try:
                    lookup(cfg, key)
                except KeyError:
                    pytest.fail(f'{spec_path}: option {option!r} sets a key that '
                                f'{run.config} does not have')


@pytest.mark.slow
def test_paper_grid_covers_figures_4_to_10():
    spec = sweeps.load_spec(osp.join(ROOT, 'configs', 'dml_benchmark', 'sweeps',
                                    'berton2023_figs4-10.py'))
    assert sorted(f['figure'] for f in spec['factors'].values()) == list(range(4, 11))
    assert len(spec['losses']) == 12 and len(spec['datasets']) == 4
    assert spec['seeds'] == [0, 1, 2]
    # Fig. 10 (classifier learning rate) shows the classification losses only.
    families = {spec['families'][loss] for loss in spec['factors']['classifier_lr']['losses']}
    assert families == {'classification'}
