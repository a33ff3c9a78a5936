"""docs/customize.md's "Adding a built-in dataset" as written: its module registered as
``irtbox.datasets.toys10k`` (the one import line of the page run against it), then its
"try it" block run in an empty folder; and the rest of irtbox finds the dataset with no other
edit: the prepare listing, the prepare command of a config, a rehearsal's miniatures."""
import sys
import types

import pytest
from mmengine.config import Config

from irtbox.registry import DATASETS
from tests.doc_pages import code_blocks

MODULE = 'irtbox.datasets.toys10k'


def _block(first_line):
    blocks = [text for language, text in code_blocks('customize.md')
              if language == 'python' and text.startswith(first_line + '\n')]
    assert len(blocks) == 1, first_line
    return blocks[0]


@pytest.fixture
def toys10k():
    """The page's module as a module of irtbox.datasets, unregistered afterwards."""
    module = types.ModuleType(MODULE)
    module.__package__ = 'irtbox.datasets'
    sys.modules[MODULE] = module
    try:
        exec(compile(_block('# irtbox/datasets/toys10k.py'), 'toys10k.py', 'exec'),
             module.__dict__)
        package = dict(__name__='irtbox.datasets', __package__='irtbox.datasets')
        exec(_block('# irtbox/datasets/__init__.py: the one line that registers it'), package)
        assert package['Toys10kDataset'] is DATASETS.get('Toys10kDataset')
        yield module
    finally:
        sys.modules.pop(MODULE, None)
        DATASETS.module_dict.pop('Toys10kDataset', None)


def test_the_page_runs_as_written(toys10k, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(_block('# try it'), 'customize.md: try it', 'exec'), {})
    assert capsys.readouterr().out.startswith(
        'toys10k test under toys10k_miniature: 32 images (published: 5,000), 8 classes '
        '(published: 500); ')


def test_prepare_and_the_rehearsals_find_it(toys10k, tmp_path):
    from irtbox.ops.miniaturize import point_datasets
    from irtbox.cli.prepare import listing
    from irtbox.ops.prepare.missing import prepared_dataset
    assert any(line.split()[:3] == ['toys10k', '400', 'MB'] for line in listing().splitlines())
    cfg = dict(type='Toys10kDataset', split='train')
    assert prepared_dataset(cfg, 'data/toys10k') == 'toys10k'
    run = Config(dict(train_dataloader=dict(dataset=dict(cfg, data_root='data/toys10k'))))
    assert point_datasets(run, str(tmp_path)) == ['train_dataloader: miniature toys10k']
    dataset = DATASETS.build(dict(run.train_dataloader.dataset, serialize_data=False))
    assert len(dataset) == 32 and dataset.data_root == str(tmp_path / 'toys10k')
