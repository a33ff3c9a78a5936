"""A killed ``torchrun`` launcher leaves no orphaned ranks or dataloader workers."""
import os
import re
import signal
import subprocess
import time

import pytest

from tests.shared_runs import dist_train
from tests.test_reliability.reliability_helpers import TINY_CONFIG, descendants


def running(pid):
    """Alive and not a zombie (an exited orphan may wait for a reaper that never comes)."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir('/proc'), reason='reads the process tree from /proc (Linux)')
def test_killed_launcher_leaves_no_orphans(tmp_path):
    log = open(tmp_path / 'out.log', 'w')
    launcher = dist_train(
        TINY_CONFIG, tmp_path / 'w', '--cfg-options', 'train_cfg.max_iters=100000',
        'train_cfg.val_interval=100000', 'default_hooks.checkpoint.interval=100000',
        'train_dataloader.num_workers=1', 'train_dataloader.persistent_workers=True',
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    tree = []  # every process started, for the clean-up whatever happens
    try:
        deadline = time.time() + 240
        while not re.search(r'Iter\(train\) \[\s*3/100000\]', (tmp_path / 'out.log').read_text()):
            assert launcher.poll() is None and time.time() < deadline, \
                (tmp_path / 'out.log').read_text()[-3000:]
            time.sleep(0.1)
        # The DDP wrapper of CPU runs used to warn (broadcast_buffers FutureWarning) every run.
        assert 'FutureWarning' not in (tmp_path / 'out.log').read_text()
        torchrun = launcher.pid  # dist_train.sh and `irtbox train --nproc` exec into it
        assert 'irtbox.cli.launch' in open(f'/proc/{torchrun}/cmdline').read()
        tree = descendants(torchrun)  # 2 ranks, each with its dataloader worker
        assert len(tree) >= 4, tree
        os.kill(torchrun, signal.SIGKILL)
        killed = time.time()
        while any(running(pid) for pid in tree) and time.time() - killed < 10:
            time.sleep(0.2)
        # Before: the ranks trained on without their launcher, workers with them.
        assert not [pid for pid in tree if running(pid)], 'orphans left 10 s after the kill'
    finally:
        for pid in set(tree + descendants(launcher.pid) + [launcher.pid]):
            if running(pid):
                os.kill(pid, signal.SIGKILL)
        launcher.wait()
        log.close()


def test_cpu_ddp_wrapper_raises_no_deprecation_warning(tmp_path):
    import warnings

    import torch
    import torch.distributed as dist
    from mmengine.registry import MODEL_WRAPPERS

    from irtbox.utils.dist import ddp_wrapper_cfg
    if torch.cuda.is_available():
        pytest.skip('checks the CPU (gloo) wrapper settings')
    dist.init_process_group('gloo', init_method=f'file://{tmp_path}/store', rank=0, world_size=1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            MODEL_WRAPPERS.build(ddp_wrapper_cfg(),
                                 default_args=dict(module=torch.nn.Linear(2, 2)))
    finally:
        dist.destroy_process_group()


# A rehearsal running one phase whose process stands for `irtbox train` (it arms itself as
# irtbox's commands do, then trains "forever").
REHEARSAL = '''
import sys
from irtbox.ops.rehearse import _run_phase
PHASE = ("from irtbox.utils.exit_status import exit_with_parent_if_asked; "
         "exit_with_parent_if_asked(); "
         "import time; print('training', flush=True); time.sleep(600)")
_run_phase('train', [sys.executable, '-c', PHASE], sys.argv[1], 600)
'''


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir('/proc'), reason='reads the process tree from /proc (Linux)')
@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_rehearsal_ends_its_phase(sig, tmp_path):
    # Before: the phases ran in their own session and nothing ended them: after Ctrl-C or
    # SIGTERM to rehearse, the launcher and both ranks went on until the phase timeout.
    import sys
    log = tmp_path / 'train.log'
    # SIGINT as at a terminal: a test run started in the background inherits it ignored.
    rehearsal = subprocess.Popen([sys.executable, '-c', REHEARSAL, str(log)],
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    phase = []
    try:
        deadline = time.time() + 60
        while not (log.exists() and 'training' in log.read_text()):
            assert rehearsal.poll() is None and time.time() < deadline
            time.sleep(0.1)
        phase = descendants(rehearsal.pid)
        assert phase
        os.kill(rehearsal.pid, sig)
        stopped = time.time()
        while any(running(pid) for pid in phase) and time.time() - stopped < 10:
            time.sleep(0.1)
        assert not [pid for pid in phase if running(pid)], 'the phase outlived its rehearsal'
    finally:
        for pid in phase + [rehearsal.pid]:
            if running(pid):
                os.kill(pid, signal.SIGKILL)
        rehearsal.wait()
