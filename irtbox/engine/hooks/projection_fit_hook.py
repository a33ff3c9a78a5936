"""Hooks that learn a model's fitted projections (PCA, whitening) from descriptors."""
import torch
from mmengine.dist import broadcast, get_rank, get_world_size
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.utils import ProgressBar

from irtbox.models.necks import FittedProjection, LearnedWhitening, PCAReduction
from irtbox.registry import HOOKS
from irtbox.utils.dist import gather_round_robin
from .utils import bare_model

__all__ = ['ProjectionFitHook', 'PCAFitHook', 'WhiteningFitHook']


class ProjectionFitHook(Hook):
    """Fits the model's ``module_type`` modules on the descriptors they receive. The descriptors are
    the modules' inputs while the model runs in eval mode over ``dataloader`` (at a single scale
    when ``single_scale``, else as at test time). A fit happens when the weights changed since the
    last one and the projection is about to be used or saved: before validation, testing, and a
    checkpoint (which is then self-contained). Under DDP each rank extracts part of the set and rank
    0 fits and broadcasts, so a fit before a checkpoint runs in ``prepare_checkpoint`` (every rank).

    Args:
        dataloader: dataloader config (dataset, sampler, batch_size, ...).
        refit_on_test: refit before testing even when the model holds a fitted projection.
    """

    priority = 'ABOVE_NORMAL'
    module_type = FittedProjection
    single_scale = True

    def __init__(self, dataloader: dict, refit_on_test: bool = False):
        self.dataloader_cfg = dataloader
        self.refit_on_test = refit_on_test
        self._dataloader = None
        self._stale = True

    def _modules(self, runner) -> dict:
        # The momentum encoder's copy never projects (it only runs in training mode).
        return {name: m for name, m in bare_model(runner).named_modules()
                if isinstance(m, self.module_type) and not name.startswith('momentum_encoder.')}

    def _all_fitted(self, runner) -> bool:
        return all(bool(m.fitted) for m in self._modules(runner).values())

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        self._stale = True

    def before_val(self, runner) -> None:
        if self._stale or not self._all_fitted(runner):
            self.fit(runner)

    def before_test(self, runner) -> None:
        if self.refit_on_test or not self._all_fitted(runner):
            self.fit(runner)

    def prepare_checkpoint(self, runner) -> None:
        if self._stale:
            self.fit(runner)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        # Still stale only under a runner that does not call prepare_checkpoint (MMEngine's
        # own): one process can fit here; under DDP the fit would wait on rank 0 alone.
        if self._stale:
            if get_world_size() > 1:
                raise RuntimeError(
                    f'{type(self).__name__}: the projection must be refitted before this '
                    'checkpoint on every rank, which needs runner_type=\'IrtboxRunner\' (the '
                    'default of build_runner); this run uses ' f'{type(runner).__name__}.')
            self.fit(runner)
        state = checkpoint['state_dict']
        for name, module in self._modules(runner).items():
            for key, value in module.state_dict().items():
                state[f'{name}.{key}'] = value.detach().cpu()

    def fit_module(self, module, feats: torch.Tensor, dataset) -> None:
        module.fit(feats)

    @torch.no_grad()
    def fit(self, runner) -> None:
        modules = self._modules(runner)
        if not modules:
            return
        if self._dataloader is None:
            self._dataloader = runner.build_dataloader(self.dataloader_cfg, seed=runner.seed)
        model = bare_model(runner)
        was_training = model.training
        model.eval()
        scales = model.test_scales
        if self.single_scale:
            model.test_scales = (1.0,)
        try:
            for module in modules.values():
                self._fit_one(model, module)
        finally:
            model.test_scales = scales
            model.train(was_training)
        self._stale = False

    def _fit_one(self, model, module) -> None:
        captured = []
        handle = module.register_forward_pre_hook(
            lambda mod, args: captured.append(args[0].detach().float().cpu()))
        loader = self._dataloader
        progress = ProgressBar(len(loader)) if get_rank() == 0 else None
        try:
            with module.passthrough():
                for data in loader:
                    model.test_step(data)
                    if progress:
                        progress.update()
        finally:
            handle.remove()
        feats = gather_round_robin(torch.cat(captured), len(loader.dataset))
        if get_rank() == 0:
            print_log(f'\n{type(self).__name__}: fitting {type(module).__name__} '
                      f'{module.in_dim} -> {module.out_dim} on {feats.shape[0]} descriptors',
                      logger='current')
            self.fit_module(module, feats, loader.dataset)
        share_fitted(module)


def share_fitted(module) -> None:
    """Rank 0's fitted buffers to every rank, and each rank's host copy of the fitted flag
    read again from them: a flag cached beside a broadcast buffer would keep saying 'not
    fitted' on the other ranks (their first validation would fail)."""
    for buf in module.buffers():
        broadcast(buf, src=0)
    module.buffers_restored()


@HOOKS.register_module()
class PCAFitHook(ProjectionFitHook):
    """Learns every ``PCAReduction`` neck from single-scale descriptors of ``dataloader``
    (IRT ▷128: the training set seen with the test pipeline). See :class:`ProjectionFitHook`."""

    module_type = PCAReduction


@HOOKS.register_module()
class WhiteningFitHook(ProjectionFitHook):
    """Learns the model's ``LearnedWhitening`` from descriptors extracted as at test time. For
    ``method='learned'`` the dataset must carry the matching pairs in its metainfo (``qidxs``,
    ``pidxs``). See :class:`ProjectionFitHook`."""

    module_type = LearnedWhitening
    single_scale = False

    def fit_module(self, module, feats: torch.Tensor, dataset) -> None:
        meta = getattr(dataset, 'metainfo', {}) or {}
        module.fit(feats, meta.get('qidxs'), meta.get('pidxs'))
