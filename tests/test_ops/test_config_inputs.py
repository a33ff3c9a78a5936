"""What the check of a command's inputs reads of a config without torch (irtbox.ops.config_inputs):
its copy of the prepared datasets' classes agrees with what the classes declare."""
import glob
import os.path as osp

import pytest

from irtbox.datasets.spec import _declared, spec_of_config
from irtbox.ops.config_inputs import PREPARED_CLASSES, missing_roots, named_dataset
from irtbox.ops.prepare.missing import prepared_dataset
from irtbox.utils.config import CONFIGS_DIR, load_config


def test_the_copy_of_the_prepared_datasets_is_what_the_classes_declare():
    """A dataset added to irtbox prepare (a class's ``specs``) is added to the copy too."""
    declared = {spec.name: cls.__name__ for cls, spec in _declared()
                if spec.files and not spec.also_read_with}  # R1M: read with distractors_list
    assert PREPARED_CLASSES == declared


def test_the_dataset_is_named_by_its_class_as_the_classes_name_it():
    """Without importing the classes (torch) where the config's names say it, wherever the
    folder is; else the classes tell."""
    for dataset, root, named in (
            (dict(type='SOPDataset'), 'data/sop/', 'sop'),
            (dict(type='irtbox.CUBDataset'), '/mnt/cub', 'cub'),
            (dict(type='FolderDataset'), 'x/digits', 'digits'),
            (dict(type='SOPDataset'), 'mine/products', 'sop'),
            (dict(type='RevisitedDataset', dataset_name='rparis6k'), 'data/roxford5k', 'rparis6k'),
            (dict(type='RevisitedDataset'), 'data/rparis6k', None),  # reads its default
            (dict(type='CSVDataset'), 'data/cub', None)):  # another class
        assert named_dataset(dataset, root) == named, (dataset, root)
        if named not in (None, 'digits'):
            assert spec_of_config(dataset).name == named
    assert prepared_dataset(dict(type='RevisitedDataset'), 'data/rparis6k') == 'roxford5k'
    assert prepared_dataset(dict(type='CSVDataset'), 'data/cub') is None


def _configs(pattern):
    return sorted(glob.glob(osp.join(CONFIGS_DIR, pattern), recursive=True))


def _agree(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no dataset here: every root is missing
    cfg = load_config(path)
    for _, dataset in missing_roots(cfg):
        root = dataset['data_root']
        assert named_dataset(dataset, root) == prepared_dataset(dataset, root), (path, root)


@pytest.mark.parametrize('path', _configs('_base_/datasets/*.py'),
                         ids=lambda p: osp.basename(p))
def test_the_shipped_dataset_configs_name_their_dataset_as_the_classes_do(path, tmp_path,
                                                                         monkeypatch):
    _agree(path, tmp_path, monkeypatch)


@pytest.mark.slow
def test_every_shipped_config_names_its_datasets_as_the_classes_do(tmp_path, monkeypatch,
                                                                   shipped_configs_parsed_once):
    for path in _configs('**/*.py'):
        if '_base_' not in path:
            _agree(path, tmp_path, monkeypatch)
