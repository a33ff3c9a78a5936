"""Learns the model's PCA neck from the descriptors of a (training) set."""
from typing import Optional

import torch
from mmengine.dist import broadcast, collect_results, get_rank
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from mmengine.utils import ProgressBar

from irtbox.models.necks import PCAReduction
from irtbox.registry import HOOKS


@HOOKS.register_module()
class PCAFitHook(Hook):
    """Fits every ``PCAReduction`` neck of the model on the descriptors it receives.

    The descriptors are those entering the neck (e.g. the CLS tokens before PCA
    and L2), extracted in eval mode at a single scale from ``dataloader`` — in
    IRT the training set with the test pipeline. Fitting happens whenever the
    weights have changed since the last fit and the projection is about to be
    used or saved: before validation, before testing (or when the loaded
    checkpoint holds no fitted PCA), and before a checkpoint is written (the
    fresh buffers are written into it, so saved checkpoints are self-contained).
    Under DDP each rank extracts part of the set; rank 0 fits and broadcasts.

    Args:
        dataloader: dataloader config (dataset, sampler, batch_size, ...).
        refit_on_test: refit before testing even when the loaded model holds a fitted PCA.
    """

    priority = 'ABOVE_NORMAL'

    def __init__(self, dataloader: dict, refit_on_test: bool = False):
        self.dataloader_cfg = dataloader
        self.refit_on_test = refit_on_test
        self._dataloader = None
        self._stale = True

    @staticmethod
    def _unwrap(model):
        return model.module if is_model_wrapper(model) else model

    def _pca_necks(self, runner) -> dict:
        # The momentum encoder's copy never projects (it only runs in training mode).
        return {name: m for name, m in self._unwrap(runner.model).named_modules()
                if isinstance(m, PCAReduction) and not name.startswith('momentum_encoder.')}

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        self._stale = True

    def before_val(self, runner) -> None:
        if self._stale or not all(bool(m.fitted) for m in self._pca_necks(runner).values()):
            self.fit(runner)

    def before_test(self, runner) -> None:
        if self.refit_on_test or not all(bool(m.fitted) for m in self._pca_necks(runner).values()):
            self.fit(runner)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        if self._stale:
            self.fit(runner)
        state = checkpoint['state_dict']
        for name, neck in self._pca_necks(runner).items():
            for key, value in neck.state_dict().items():
                state[f'{name}.{key}'] = value.detach().cpu()

    @torch.no_grad()
    def fit(self, runner) -> None:
        necks = self._pca_necks(runner)
        if not necks:
            return
        if self._dataloader is None:
            self._dataloader = runner.build_dataloader(self.dataloader_cfg, seed=runner.seed)
        model = self._unwrap(runner.model)
        was_training = model.training
        model.eval()
        scales, model.test_scales = model.test_scales, (1.0,)
        for neck in necks.values():
            self._fit_one(runner, model, neck)
        model.test_scales = scales
        model.train(was_training)
        self._stale = False

    def _fit_one(self, runner, model, neck: PCAReduction) -> None:
        captured = []
        handle = neck.register_forward_pre_hook(
            lambda module, args: captured.append(args[0].detach().float().cpu()))
        loader = self._dataloader
        progress = ProgressBar(len(loader)) if get_rank() == 0 else None
        try:
            with neck.passthrough():
                for data in loader:
                    model.test_step(data)
                    if progress:
                        progress.update()
        finally:
            handle.remove()
        rows = [row for chunk in captured for row in chunk]
        rows = collect_results(rows, len(loader.dataset), device='cpu')
        if get_rank() == 0:
            feats = torch.stack(rows)
            print_log(f'\nPCAFitHook: fitting PCA {neck.in_dim} -> {neck.out_dim} on '
                      f'{feats.shape[0]} descriptors', logger='current')
            neck.fit(feats)
        for buf in (neck.mean, neck.components, neck.eigenvalues, neck.fitted):
            broadcast(buf, src=0)
