"""A ``CheckpointHook`` that deletes a checkpoint only once its successor is complete. MMEngine's
removes the oldest checkpoint and the previous ``best_*.pth`` *before* it writes the new one, so a
failed or killed save leaves fewer intact checkpoints than before (with ``max_keep_ckpts=1`` none)
and ``last_checkpoint`` naming a deleted file."""
import os
import os.path as osp
import re
from typing import List

from mmengine.dist import is_main_process
from mmengine.hooks import CheckpointHook as MMEngineCheckpointHook

from irtbox.registry import HOOKS
from irtbox.utils.fileio import atomic_write_text
from irtbox.utils.mmengine_compat import CheckpointHookPrivates

__all__ = ['CheckpointHook', 'run_checkpoints']

_CKPT_NAME = re.compile(r'^(iter|epoch)_(\d+)\.pth$')


def run_checkpoints(work_dir: str) -> List[str]:
    """The ``iter_<n>.pth`` / ``epoch_<n>.pth`` files of ``work_dir``, newest (highest n) first."""
    if not osp.isdir(work_dir):
        return []
    found = [(int(m.group(2)), name) for name in os.listdir(work_dir)
             if (m := _CKPT_NAME.match(name))]
    return [osp.join(work_dir, name) for _, name in sorted(found, reverse=True)]


@HOOKS.register_module()
class CheckpointHook(CheckpointHookPrivates, MMEngineCheckpointHook):
    """MMEngine's ``CheckpointHook`` (same arguments, same name under irtbox's scope) whose
    outdated files are deleted only after the new file and ``last_checkpoint`` are written.
    A kill in between leaves one file too many, which the resumed run deletes (the outdated
    step stays in the ``keep_ckpt_ids`` the new checkpoint records)."""

    def _remove(self, path: str) -> None:
        if self.file_backend.isfile(path):
            self.file_backend.remove(path)
        elif self.file_backend.isdir(path):  # DeepSpeed's checkpoints are folders
            self.file_backend.rmtree(path)

    def save_with_step(self, runner, step, meta) -> None:
        outdated = []
        if self.max_keep_ckpts > 0 and not (self.keep_ckpt_ids
                                            and self.keep_ckpt_ids[-1] == step):
            # The deque holds max_keep_ckpts steps: the outdated ones are recorded in this
            # checkpoint too (kept until it is complete), then dropped.
            recorded = list(self.keep_ckpt_ids) + [step]
            outdated = recorded[:-self.max_keep_ckpts]
            self.keep_ckpt_ids.append(step)
            runner.message_hub.update_info('keep_ckpt_ids', recorded)
        name = self.filename_tmpl.format(step)
        self.last_ckpt = self.file_backend.join_path(self.out_dir, name)
        runner.message_hub.update_info('last_ckpt', self.last_ckpt)
        runner.save_checkpoint(
            self.out_dir, name, self.file_client_args, save_optimizer=self.save_optimizer,
            save_param_scheduler=self.save_param_scheduler, meta=meta, by_epoch=self.by_epoch,
            backend_args=self.backend_args, **self.args)
        if outdated:
            runner.message_hub.update_info('keep_ckpt_ids', list(self.keep_ckpt_ids))
        if not is_main_process():
            return
        atomic_write_text(osp.join(runner.work_dir, 'last_checkpoint'), self.last_ckpt)
        for old in outdated:
            self._remove(self.file_backend.join_path(self.out_dir, self.filename_tmpl.format(old)))

    def save_best_checkpoint(self, runner, metrics) -> None:
        """MMEngine's, with the previous best file deleted after the new one is written."""
        if not self.save_best:
            return
        previous = dict(self.best_ckpt_path_dict) if len(self.key_indicators) > 1 \
            else {None: self.best_ckpt_path}
        # With no previous path MMEngine deletes nothing; it is told there is none.
        if len(self.key_indicators) > 1:
            self.best_ckpt_path_dict = {key: None for key in self.best_ckpt_path_dict}
        else:
            self.best_ckpt_path = None
        try:
            super().save_best_checkpoint(runner, metrics)
        finally:
            now = dict(self.best_ckpt_path_dict) if len(self.key_indicators) > 1 \
                else {None: self.best_ckpt_path}
            for key, old in previous.items():
                if now.get(key) is None:  # not improved: unchanged
                    if len(self.key_indicators) > 1:
                        self.best_ckpt_path_dict[key] = old
                    else:
                        self.best_ckpt_path = old
        for key, old in previous.items():  # reached only when every save succeeded
            new = now.get(key)
            if old and new and new != old and is_main_process():
                self._remove(old)
                runner.logger.info(f'The previous best checkpoint {old} is removed')
