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


# What the fork server of a test process imports once, for every rank forked from it: a rank
# of a training imports the rest of torch (torch._dynamo, with the first optimizer), MMEngine's
# runner, timm, every registered part (the config's keys are checked) and matplotlib (the
# visualizer), seconds per rank otherwise. The first test of a process to start the fork
# server sets its modules; every test that starts one should pass these (:func:`forkserver`).
FORKSERVER_PRELOAD = ['torch._dynamo', 'mmengine.runner', 'timm', 'irtbox.ops.config_check',
                      'irtbox.cli.train', 'irtbox.apis', 'matplotlib.figure',
                      'matplotlib.backends.backend_agg', 'tests.shared_runs']


def forkserver(*modules):
    """The start method ``'forkserver'``, its server (when this call starts it) preloading
    :data:`FORKSERVER_PRELOAD` and ``modules`` (e.g. the calling test module, for its rank
    function). A fork of a test process that has run a backward cannot run one (autograd's
    threads); a spawned process imports everything again."""
    import torch.multiprocessing as mp
    mp.get_context('forkserver').set_forkserver_preload([*FORKSERVER_PRELOAD, *modules])
    return 'forkserver'


def _irtbox_rank(rank, world, port, run_id, cwd, argv):
    """A rank as torchrun starts one (its environment, one thread, ``irtbox COMMAND
    --launcher pytorch ARGS``), forked from the fork server."""
    import gc
    import multiprocessing

    import torch
    gc.freeze()  # the preloaded modules: not collected, so neither scanned nor copied
    multiprocessing.set_start_method('fork', force=True)  # a fresh interpreter's default
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), GROUP_RANK='0',
                      ROLE_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port),
                      TORCHELASTIC_RUN_ID=run_id, TORCHELASTIC_RESTART_COUNT='0',
                      OMP_NUM_THREADS='1', CUDA_VISIBLE_DEVICES='')
    torch.set_num_threads(1)
    os.chdir(cwd)
    from irtbox.cli.main import main
    main([argv[0], '--launcher', 'pytorch', *argv[1:]])


def forked_ranks(command, *args, nproc=2, timeout=600):
    """``irtbox COMMAND ARGS`` on ``nproc`` CPU ranks (gloo) as ``tools/dist_*.sh`` runs each
    of them (``--launcher pytorch``, torchrun's environment, one thread, in the repository
    root), forked from the fork server (:func:`forkserver`) rather than started by the
    launcher as fresh interpreters: for the tests of what the ranks compute, not of the
    launcher. Raises if a rank fails or the ranks take over ``timeout`` seconds."""
    import time
    import uuid

    import torch.multiprocessing as mp
    context = mp.start_processes(
        _irtbox_rank, args=(nproc, free_port(), uuid.uuid4().hex, ROOT,
                            [command, *map(str, args)]),
        nprocs=nproc, join=False, start_method=forkserver())
    deadline = time.monotonic() + timeout
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            raise TimeoutError(f'irtbox {command} on {nproc} forked ranks: over {timeout} s')
