"""A 2-process CPU (gloo) run of tools/dist_train.sh (the session's tiny_ddp_run) and of
tools/dist_test.sh on its checkpoint."""
import glob
import os
import os.path as osp
import subprocess

import pytest

from irtbox.utils.checkpoint import safe_torch_load
from irtbox.utils.dist import free_port

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY_CONFIG = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')


def run(cmd):
    env = dict(os.environ, PORT=str(free_port()), OMP_NUM_THREADS='1', CUDA_VISIBLE_DEVICES='')
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_dist_train_and_test_two_cpu_processes(tiny_ddp_run, tmp_path):
    train_dir, log = tiny_ddp_run
    # The terminal's header (MMEngine's environment dump is in the log file: docs/get_started.md).
    assert 'device: cpu, 2 process(es)' in log
    (log_file, ) = glob.glob(osp.join(train_dir, '*', '*.log'))
    assert 'Distributed launcher: pytorch' in open(log_file).read()
    ckpt = osp.join(train_dir, 'iter_4.pth')
    state = safe_torch_load(ckpt)['state_dict']
    # Both ranks' batches went into the memory: 4 iterations x 2 ranks x 4 images (size 12, full).
    filled = [v for k, v in state.items() if k.endswith('memory.filled') or k.endswith('num_filled')]
    assert filled and int(filled[0]) == 12
    out = str(tmp_path / 'dist.npz')
    run(['bash', 'tools/dist_test.sh', TINY_CONFIG, ckpt, '2', '--work-dir',
         str(tmp_path / 'test'), '--out', out])
    import numpy as np
    results = np.load(out)
    # Every test image exactly once although the sampler padded the last rank.
    assert sorted(results['sample_idx'].tolist()) == list(range(len(results['sample_idx'])))
    assert len(results['sample_idx']) == 12
