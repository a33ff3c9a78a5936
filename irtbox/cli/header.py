"""The few lines a training or a test shows before its progress, in place of MMEngine's ~290-line dump
of environment, config and hooks (kept in the log file: :mod:`irtbox.utils.terminal`): what
runs, where it writes, on what data and device, and what to expect."""
import datetime
import logging
import time
from typing import List

from mmengine.hooks import Hook

from irtbox.utils.terminal import VERBOSE_VAR

__all__ = ['RunHeader']


def _size(loop) -> str:
    """'N images (root)' of each dataset of ``loop`` (a multi-dataset loop's too)."""
    loaders = getattr(loop, 'dataloaders', None) or [getattr(loop, 'dataloader', None)]
    datasets = [getattr(loader, 'dataset', None) for loader in loaders]
    return ', '.join(f'{len(d)} images' + (f' ({d.data_root})' if getattr(d, 'data_root', '')
                                          else '') for d in datasets if d is not None)


class RunHeader(Hook):
    """Logs the header when the training or the test starts (its datasets are built by
    then), and in a training once
    :data:`MEASURED` iterations have run after the first (its warm-up), the time the rest
    should take at their pace."""

    priority = 'VERY_LOW'
    MEASURED = 5

    def __init__(self, config: str):
        self.config = config
        self._first = None  # (iteration, time) at the end of the first iteration

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        now, done = time.perf_counter(), runner.iter + 1
        if self._first is None:
            self._first = (done, now)
        elif done - self._first[0] == self.MEASURED and runner.max_iters > done:
            pace = (now - self._first[1]) / self.MEASURED
            left = datetime.timedelta(seconds=round(pace * (runner.max_iters - done)))
            runner.logger.info(f'expect: about {left} for the {runner.max_iters - done} '
                               f'iterations left ({pace:.3g} s per iteration over '
                               f'iterations {done - self.MEASURED + 1}-{done})')

    def before_train(self, runner) -> None:
        cfg = runner.cfg
        train = cfg.get('train_cfg') or {}
        logger = (cfg.get('default_hooks') or {}).get('logger') or {}
        checkpoint = (cfg.get('default_hooks') or {}).get('checkpoint') or {}
        unit = 'epochs' if train.get('by_epoch') else 'iterations'
        self._log(runner, f'train {_size(runner.train_loop)}' + (
            f'; val {_size(runner.val_loop)}' if runner.val_loop is not None else ''),
            f"{train.get('max_epochs' if unit == 'epochs' else 'max_iters')} {unit} "
            f"from iteration {runner.iter}, validation every {train.get('val_interval', 1)}, "
            f"progress with its eta every {logger.get('interval', 10)} iterations, "
            f"checkpoints every {checkpoint.get('interval', '?')}")

    def before_test(self, runner) -> None:
        self._log(runner, f'test {_size(runner.test_loop)}',
                  f"weights of {runner.cfg.get('load_from') or 'the config (no checkpoint)'}, "
                  'progress with its eta, then the metrics')

    def _log(self, runner, data: str, expect: str) -> None:
        from irtbox.utils.dist import resolve_device
        files = [h.baseFilename for h in runner.logger.handlers
                 if isinstance(h, logging.FileHandler)]
        lines: List[str] = [
            f'config: {self.config}',
            f'work dir: {runner.work_dir}' + (f' (log: {files[0]}: with the environment, '
                                               f'config and hooks that {VERBOSE_VAR}=1 or '
                                               '--verbose shows here)' if files else ''),
            f'data: {data}', f'device: {resolve_device().type}, {runner.world_size} process(es)',
            f'expect: {expect}']
        for line in lines:
            runner.logger.info(line)
