"""The cheap count check of ``irtbox check`` on every dataset a run builds: a split of a
published benchmark whose counts are not the published ones gives a warning (not an error:
a subset or a copy of your own may be on purpose)."""
from mmengine.dist import is_main_process
from mmengine.hooks import Hook

from irtbox.datasets.spec import count_mismatch
from irtbox.registry import HOOKS

__all__ = ['DatasetCountCheckHook']


def _loaders(loop) -> list:
    """The dataloaders of a loop: ``dataloaders`` of the multi-dataset loops, else the one."""
    if loop is None:
        return []
    loaders = getattr(loop, 'dataloaders', None)
    return list(loaders) if loaders else [getattr(loop, 'dataloader', None)]


@HOOKS.register_module()
class DatasetCountCheckHook(Hook):
    """Before training, each validation and testing, compare every dataset of the loops with
    the published counts its class's spec declares for its split
    (:func:`irtbox.datasets.spec.count_mismatch`: no image is opened) and
    log one warning per dataset that differs, naming ``irtbox check`` to find out why.
    Added by :func:`~irtbox.apis.build_runner` (training and testing) unless the config
    sets ``check_dataset_counts = False`` (rehearsals on miniatures do)."""

    priority = 'VERY_LOW'

    def __init__(self):
        self._seen = set()

    def before_train(self, runner) -> None:
        self._check(runner, _loaders(runner.train_loop))

    def before_val(self, runner) -> None:
        self._check(runner, _loaders(runner.val_loop))

    def before_test(self, runner) -> None:
        self._check(runner, _loaders(runner.test_loop))

    def _check(self, runner, loaders) -> None:
        if not is_main_process():
            return
        for loader in loaders:
            dataset = getattr(loader, 'dataset', None)
            if dataset is None or id(dataset) in self._seen:
                continue
            self._seen.add(id(dataset))
            message = count_mismatch(dataset)
            if message:
                runner.logger.warning(message)
