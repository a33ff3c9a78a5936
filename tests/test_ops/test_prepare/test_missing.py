"""The datasets a config reads that are not there, each with the command that prepares it
(irtbox.ops.prepare.missing)."""
import os

from mmengine.config import Config

from irtbox.ops.prepare.missing import DIGITS, MissingData, missing_data, prepared_dataset


def loader(dataset):
    return dict(batch_size=2, dataset=dataset)


def test_each_missing_root_once_with_its_prepared_dataset(tmp_path, monkeypatch):
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
                    'sop'),
        MissingData('val_dataloader.dataset', 'data/rparis6k',
                    'rparis6k'),
        MissingData('test_dataloader.0.dataset', 'data/digits',
                    DIGITS),
        MissingData('test_dataloader.1.dataset.dataset', 'data/mine', None)]


def test_the_distinguishing_argument_picks_the_dataset():
    assert prepared_dataset(dict(type='RevisitedDataset', dataset_name='roxford5k'), 'r') == \
        'roxford5k'
    assert prepared_dataset(dict(type='CSVDataset'), 'data/mine') is None

