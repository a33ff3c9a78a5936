"""Validation/test loops over several datasets (e.g. ROxford5k and RParis6k in one run)."""
from typing import Dict, Sequence

import torch
from mmengine.runner import BaseLoop, autocast

from irtbox.registry import LOOPS

__all__ = ['MultiDatasetValLoop', 'MultiDatasetTestLoop']


class _MultiDatasetLoop(BaseLoop):
    """Runs the model over each dataset in turn and evaluates it with its own evaluator.
    ``dataloader`` and ``evaluator`` are lists of one entry per dataset. The metrics of all datasets
    are returned in one dict, so their names must differ (e.g. by prefix). ``self.dataloader`` /
    ``self.evaluator`` are the first pair, for code that expects one."""

    stage = ''

    def __init__(self, runner, dataloader: Sequence, evaluator: Sequence, fp16: bool = False):
        if not isinstance(dataloader, (list, tuple)) or not isinstance(evaluator, (list, tuple)) \
                or len(dataloader) != len(evaluator):
            raise ValueError(
                f'{type(self).__name__}: {self.stage}_dataloader and {self.stage}_evaluator must be '
                f'lists of the same length (one entry per dataset), got {type(dataloader).__name__} '
                f'and {type(evaluator).__name__}')
        super().__init__(runner, dataloader[0])
        self.dataloaders = [self.dataloader] + [
            runner.build_dataloader(d, seed=runner.seed) if isinstance(d, dict) else d
            for d in dataloader[1:]]
        self.evaluators = []
        for loader, cfg in zip(self.dataloaders, evaluator):
            ev = runner.build_evaluator(cfg) if isinstance(cfg, (dict, list)) else cfg
            ev.dataset_meta = getattr(loader.dataset, 'metainfo', None)
            self.evaluators.append(ev)
        self.evaluator = self.evaluators[0]
        self.fp16 = fp16

    def run(self) -> Dict[str, float]:
        self.runner.call_hook(f'before_{self.stage}')
        self.runner.call_hook(f'before_{self.stage}_epoch')
        self.runner.model.eval()
        metrics = {}
        for loader, evaluator in zip(self.dataloaders, self.evaluators):
            for idx, data_batch in enumerate(loader):
                self._run_iter(idx, data_batch, evaluator)
            new = evaluator.evaluate(len(loader.dataset))
            clash = set(new) & set(metrics)
            if clash:
                raise KeyError(f'{type(self).__name__}: metric names {sorted(clash)} come from two '
                               'datasets; give their metrics different prefixes')
            metrics.update(new)
        self.runner.call_hook(f'after_{self.stage}_epoch', metrics=metrics)
        self.runner.call_hook(f'after_{self.stage}')
        return metrics

    @torch.no_grad()
    def _run_iter(self, idx: int, data_batch, evaluator) -> None:
        self.runner.call_hook(f'before_{self.stage}_iter', batch_idx=idx, data_batch=data_batch)
        with autocast(enabled=self.fp16):
            outputs = getattr(self.runner.model, f'{self.stage}_step')(data_batch)
        evaluator.process(data_samples=outputs, data_batch=data_batch)
        self.runner.call_hook(f'after_{self.stage}_iter', batch_idx=idx, data_batch=data_batch,
                              outputs=outputs)


@LOOPS.register_module()
class MultiDatasetValLoop(_MultiDatasetLoop):
    """Validation over several datasets; see :class:`_MultiDatasetLoop`."""

    stage = 'val'


@LOOPS.register_module()
class MultiDatasetTestLoop(_MultiDatasetLoop):
    """Test over several datasets; see :class:`_MultiDatasetLoop`."""

    stage = 'test'
