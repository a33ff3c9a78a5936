"""Multi-process runs for the tests: a 2-process ``tools/dist_train.sh`` launch, and runs made
once per pytest run and shared by the tests (and xdist workers) that read them."""
import os
import os.path as osp
import shutil
import subprocess

from filelock import FileLock

from irtbox.utils.dist import free_port
from tests.gpu_semantics import rank_env

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def once_per_run(tmp_path_factory, name, make):
    """``make(folder)`` once per pytest run, even with several xdist workers: the first test
    that needs it runs it under a file lock, the others wait for it and share its folder
    (read-only). A failed ``make`` leaves no finished folder, so the next test to need it
    tries again and fails with its own message. Returns the folder."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get('PYTEST_XDIST_WORKER'):
        root = root.parent  # the run's folder, above every worker's own
    folder = root / f'once_{name}'
    with FileLock(f'{folder}.lock'):
        if not (folder / '.done').exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            (folder / '.done').touch()
    return folder


def dist_train(config, work_dir, *args, **popen_kwargs):
    """``tools/dist_train.sh CONFIG 2 --work-dir WORK_DIR ARGS`` on 2 CPU processes (gloo,
    one thread each, a free port), started in the background, with the NCCL rules a CPU
    run can check in force in the ranks (:func:`tests.gpu_semantics.nccl_rules`)."""
    env = dict(rank_env(), PORT=str(free_port()), OMP_NUM_THREADS='1', CUDA_VISIBLE_DEVICES='',
               **popen_kwargs.pop('env', {}))
    return subprocess.Popen(['bash', 'tools/dist_train.sh', str(config), '2', '--work-dir',
                             str(work_dir), *args], cwd=ROOT, env=env, **popen_kwargs)
