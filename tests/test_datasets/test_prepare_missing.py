"""The datasets a config reads that are not there, each with the command that prepares it
(irtbox.datasets.prepare.missing), and the training command that stops on them in one line."""
import os

import pytest
from mmengine.config import Config

from irtbox.cli import train as train_tool
from irtbox.datasets.prepare.missing import MissingData, missing_data, prepare_command


def loader(dataset):
    return dict(batch_size=2, dataset=dataset)


def test_each_missing_root_once_with_its_prepare_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.makedirs('data/cub')
    cfg = Config(dict(
        train_dataloader=loader(dict(type='ConcatDataset', datasets=[
            dict(type='SOPDataset', data_root='data/sop', split='train'),
            dict(type='CUBDataset', data_root='data/cub', split='train')])),  # there
        val_dataloader=loader(dict(type='RevisitedDataset', data_root='data/rparis6k',
                                   dataset_name='rparis6k')),
        test_dataloader=[loader(dict(type='FolderDataset', data_root='data/digits')),
                         loader(dict(type='RepeatDataset', times=2, dataset=dict(
                             type='CSVDataset', data_root='data/mine', ann_file='x.csv'))),
                         loader(dict(type='SOPDataset', data_root='data/sop', split='test'))],
        val_cfg=None))
    assert missing_data(cfg) == [
        MissingData('train_dataloader.dataset.datasets.0', 'data/sop',
                    'irtbox prepare sop --root data/sop'),
        MissingData('val_dataloader.dataset', 'data/rparis6k',
                    'irtbox prepare rparis6k --root data/rparis6k'),
        MissingData('test_dataloader.0.dataset', 'data/digits',
                    'irtbox prepare-digits --out data/digits'),
        MissingData('test_dataloader.1.dataset.dataset', 'data/mine', None)]


def test_the_distinguishing_argument_picks_the_dataset():
    assert prepare_command(dict(type='RevisitedDataset', dataset_name='roxford5k'), 'r') == \
        'irtbox prepare roxford5k --root r'
    assert prepare_command(dict(type='CSVDataset'), 'data/mine') is None


def test_training_on_a_missing_dataset_says_how_to_prepare_it_first(tmp_path, monkeypatch,
                                                                     capsys):
    """What a user runs from a fresh folder: the first (and only) line names the command."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        train_tool.main(['irt/irt-l_deit-s_1xb64-35k_sop.py'])
    message = str(stop.value.code)
    assert message.splitlines() == [message]
    assert message.startswith('irt/irt-l_deit-s_1xb64-35k_sop.py: no dataset at '
                              "train_dataloader.dataset.data_root='data/sop'")
    assert 'prepare it with `irtbox prepare sop --root data/sop`' in message
    assert 'train_dataloader.dataset.data_root=PATH' in message
    out = capsys.readouterr()
    assert out.out == '' and out.err == ''  # no environment or config dump before it
    assert not os.path.exists(tmp_path / 'work_dirs')
