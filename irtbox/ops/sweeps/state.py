"""The files that record how far each run of a sweep got, in its work dir."""
import os
import os.path as osp
import re

from .spec import OFF_THE_SHELF, Run

__all__ = ['RESULTS', 'EMBEDDINGS', 'TRAIN_DONE', 'FAILED', 'LOG', 'PREEMPTED_MARK', 'state_of',
           'checkpoint_of', 'saved_checkpoint']

RESULTS = 'test_results.json'
# A test writes a .npz's metrics to the same name with .json: RESULTS.
EMBEDDINGS = osp.splitext(RESULTS)[0] + '.npz'
TRAIN_DONE = 'train_done'
FAILED = 'failed'
LOG = 'sweep.log'
# The run's training was stopped by a pre-emption signal: the next attempt resumes it.
PREEMPTED_MARK = 'preempted'


def state_of(run: Run) -> str:
    """'done' (test metrics written), 'failed' (the last attempt), 'trained'
    (test missing) or 'todo'."""
    if osp.isfile(osp.join(run.work_dir, RESULTS)):
        return 'done'
    if osp.isfile(osp.join(run.work_dir, FAILED)):
        return 'failed'
    trained = run.factor == OFF_THE_SHELF or osp.isfile(osp.join(run.work_dir, TRAIN_DONE))
    return 'trained' if trained else 'todo'


def checkpoint_of(work_dir: str) -> str:
    """The weights to test: best.pth (early stopping) or the last checkpoint."""
    best = osp.join(work_dir, 'best.pth')
    if osp.isfile(best):
        return best
    last = osp.join(work_dir, 'last_checkpoint')
    if osp.isfile(last):
        with open(last) as f:
            return f.read().strip()
    raise FileNotFoundError(f'{work_dir}: training finished but left neither best.pth nor '
                            'last_checkpoint (does the config have a CheckpointHook?)')


def saved_checkpoint(work_dir: str):
    """The newest ``iter_N.pth`` / ``epoch_N.pth`` a training left in ``work_dir`` (the one
    its next attempt resumes from), or None."""
    found = [(int(m.group(2)), name) for name in (os.listdir(work_dir) if osp.isdir(work_dir)
                                                  else [])
             if (m := re.fullmatch(r'(iter|epoch)_(\d+)\.pth', name))]
    return max(found)[1] if found else None
