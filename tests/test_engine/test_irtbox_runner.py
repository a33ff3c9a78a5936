"""IrtboxRunner's own behaviour beyond MMEngine's (checkpoints and resume:
tests/test_reliability)."""
import glob
import os.path as osp

import mmengine.runner.runner as mmengine_runner
import pytest
from mmengine.config import Config

from irtbox.engine import IrtboxRunner

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')


@pytest.mark.slow
def test_runs_started_in_the_same_second_keep_their_own_logs(tmp_path, monkeypatch):
    """MMEngine names a run's logger <config>_<timestamp> and reuses an instance of that name;
    a second run in the same second must still log into its own folder."""
    monkeypatch.setattr(mmengine_runner.time, 'strftime', lambda *args: '20260101_000000')
    runners = []
    for name in ('first', 'second'):
        cfg = Config.fromfile(TINY)
        cfg.work_dir = str(tmp_path / name)
        runner = IrtboxRunner.from_cfg(cfg)
        runner.logger.info(f'hello from {name}')
        runners.append(runner)
    assert runners[0].experiment_name != runners[1].experiment_name
    for name in ('first', 'second'):
        logs = glob.glob(str(tmp_path / name / '*' / '*.log'))
        assert len(logs) == 1, name
        with open(logs[0]) as f:
            assert f'hello from {name}' in f.read()


@pytest.mark.slow
def test_best_checkpoint_records_the_iterations_done(tmp_path):
    """A checkpoint saved after validation (save_best) records the iterations done: MMEngine
    counted one more (``iter + 1`` is right only inside after_train_iter)."""
    from irtbox.utils.checkpoint import safe_torch_load
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(tmp_path)
    cfg.train_cfg.val_interval = 2
    cfg.default_hooks.checkpoint.update(save_best='recall@1', rule='greater')
    IrtboxRunner.from_cfg(cfg).train()
    best = glob.glob(str(tmp_path / 'best_*.pth'))
    assert len(best) == 1
    done = int(osp.splitext(best[0])[0].rsplit('_', 1)[1])
    assert safe_torch_load(best[0])['meta']['iter'] == done
    assert safe_torch_load(str(tmp_path / 'iter_2.pth'))['meta']['iter'] == 2


@pytest.mark.slow
def test_checkpoints_are_prepared_on_every_rank(tmp_path, monkeypatch):
    """prepare_checkpoint (collectives: the projection fits) runs on every rank; only rank 0
    writes the file."""
    import irtbox.engine.runner as runner_module
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(tmp_path)
    runner = IrtboxRunner.from_cfg(cfg)
    prepared = []

    class Preparing:
        priority = 50

        def prepare_checkpoint(self, runner):
            prepared.append(runner)

    runner._hooks.append(Preparing())
    monkeypatch.setattr(runner_module, 'is_main_process', lambda: False)
    runner.save_checkpoint(str(tmp_path), 'iter_1.pth')
    assert prepared == [runner] and not osp.exists(tmp_path / 'iter_1.pth')


@pytest.mark.slow
def test_irtbox_default_hooks_come_with_every_config_and_can_be_dropped(tmp_path):
    from irtbox.engine.runner import DEFAULT_HOOKS
    cfg = Config.fromfile(TINY)  # names none of them; only the arguments of one
    cfg.work_dir = str(tmp_path)
    cfg.default_hooks.update(non_finite_loss=dict(max_skipped=2))
    names = [type(h).__name__ for h in IrtboxRunner.from_cfg(cfg).hooks]
    assert set(DEFAULT_HOOKS.values()) <= set(names)
    cfg.default_hooks.update({name: None for name in DEFAULT_HOOKS})
    cfg.work_dir = str(tmp_path / 'again')
    names = [type(h).__name__ for h in IrtboxRunner.from_cfg(cfg).hooks]
    assert not set(DEFAULT_HOOKS.values()) & set(names)


@pytest.mark.slow
def test_the_model_carries_the_input_spec_init_model_gives_it(tmp_path):
    """The runner's model has the input spec of the same config built by init_model, so a
    results file identifies the model as an index built from it would; a config without a test
    pipeline gives a model without one. Resolved once, where the results need it."""
    from irtbox.apis import init_model
    from irtbox.apis.tester import runner_input_spec
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(tmp_path / 'with')
    runner = IrtboxRunner.from_cfg(cfg)
    assert runner_input_spec(runner) == init_model(TINY).input_spec
    model = runner.model
    assert model.input_spec == init_model(TINY).input_spec
    assert model.input_spec.size == tuple(model.input_spec.size) and model.input_spec.pipeline
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(tmp_path / 'without')
    for key in ('test_dataloader', 'test_evaluator', 'test_cfg'):
        cfg[key] = None
    runner = IrtboxRunner.from_cfg(cfg)
    assert runner_input_spec(runner) is None and runner.model.input_spec is None


def test_resume_on_a_gpu_machine_loads_the_checkpoint_onto_the_cpu(tmp_path, monkeypatch):
    """MMEngine resumes with ``map_location='default'``, its ``get_device()``: ``'cuda'`` on a
    GPU machine, which put the checkpoint's generator states on the GPU and crashed every
    resume there at the first new batch. Here ``get_device()`` says ``'cuda'`` during the
    resume as it does on a GPU machine; on this CPU a load onto CUDA fails at once, so the
    resume passes only if it loads onto the CPU (the optimizer's load moves its state to
    each parameter's device)."""
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(tmp_path)
    cfg.train_cfg.update(max_iters=2, val_interval=100)
    cfg.default_hooks.checkpoint.update(interval=2)
    IrtboxRunner.from_cfg(cfg).train()

    original = IrtboxRunner.load_or_resume

    def as_on_a_gpu_machine(self):
        with monkeypatch.context() as m:
            m.setattr(mmengine_runner, 'get_device', lambda: 'cuda')
            return original(self)

    monkeypatch.setattr(IrtboxRunner, 'load_or_resume', as_on_a_gpu_machine)
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(tmp_path)
    cfg.train_cfg.update(max_iters=3, val_interval=100)
    cfg.resume = True
    runner = IrtboxRunner.from_cfg(cfg)
    runner.train()
    assert runner.iter == 3


def test_ddp_is_built_on_the_current_device(tmp_path, monkeypatch):
    """A task that sees one GPU (``srun --gpus-per-task=1``) with LOCAL_RANK 3: MMEngine's
    default wrapper asks for device 3 ("invalid device ordinal" at the first forward); the
    runner's uses the current device. The config's own wrapper gets the same defaults and
    keeps what it sets."""
    import torch

    import irtbox.engine.runner as runner_module
    from mmengine.registry import MODEL_WRAPPERS
    from tests.gpu_semantics import FakeCuda
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(tmp_path)
    runner = IrtboxRunner.from_cfg(cfg)
    FakeCuda(monkeypatch, count=1, current=0)
    monkeypatch.setenv('LOCAL_RANK', '3')
    monkeypatch.setattr(runner_module, 'is_distributed', lambda: True)
    monkeypatch.setattr(runner, '_distributed', True)
    monkeypatch.setattr(mmengine_runner, 'get_device', lambda: 'cpu')
    built = []
    monkeypatch.setattr(MODEL_WRAPPERS, 'build',
                        lambda cfg, default_args=None: built.append((dict(cfg), default_args)))
    runner.wrap_model(None, torch.nn.Linear(2, 2))
    runner.wrap_model(dict(type='MMDistributedDataParallel', broadcast_buffers=True),
                      torch.nn.Linear(2, 2))
    assert len(built) == 2
    for wrapper, default_args in built:
        device_ids = wrapper.get('device_ids', (default_args or {}).get('device_ids'))
        assert device_ids == [0], (wrapper, default_args)
    buffers = [w.get('forward_sync_buffers', w.get('broadcast_buffers')) for w, _ in built]
    assert buffers == [False, True]


def test_a_gpu_run_allows_tf32_and_pins_its_batches(tmp_path, monkeypatch):
    """Issue 47 item 10: the default runtime's ``env_cfg.allow_tf32`` reaches torch (False turns
    it off), and a dataloader built where CUDA is pins its batches unless the config says."""
    import torch

    from tests.gpu_semantics import FakeCuda
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        for allow in (True, False):
            cfg = Config.fromfile(TINY)
            cfg.work_dir = str(tmp_path / str(allow))
            cfg.env_cfg.allow_tf32 = allow
            IrtboxRunner.from_cfg(cfg)
            assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (
                allow, allow)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
    loader = dict(batch_size=2, dataset=list(range(4)), sampler=dict(type='DefaultSampler'))
    assert not IrtboxRunner.build_dataloader(dict(loader)).pin_memory  # no CUDA: nothing to pin
    FakeCuda(monkeypatch, count=1, current=0)
    assert IrtboxRunner.build_dataloader(dict(loader)).pin_memory
    assert not IrtboxRunner.build_dataloader(dict(loader, pin_memory=False)).pin_memory


def _resume_worker(rank, init_file, work_dirs, out_dir):
    """Rank ``r`` auto-resumes with ``work_dirs[r]`` as its view of the work dir."""
    import json
    import logging
    from types import SimpleNamespace

    import torch
    import torch.distributed as torch_dist
    torch.set_num_threads(1)  # no OpenMP thread pool in a forked child
    torch_dist.init_process_group('gloo', init_method=f'file://{init_file}', rank=rank,
                                  world_size=2)
    try:
        resumed = []
        runner = SimpleNamespace(_has_loaded=False, auto_resume=True, work_dir=work_dirs[rank],
                                 logger=logging.getLogger('test'), resume=resumed.append)
        IrtboxRunner.load_or_resume(runner)
        with open(osp.join(out_dir, f'{rank}.json'), 'w') as f:
            json.dump(resumed, f)
    finally:
        torch_dist.destroy_process_group()


@pytest.mark.slow
def test_rank_0_alone_decides_which_checkpoint_every_rank_resumes(tmp_path):
    """Issue 47 item 4: ranks that see the work dir differently (NFS attribute caching after a
    restart, a read error on one node) resumed different iterations and drifted apart. Here
    rank 1 sees a newer checkpoint than rank 0; both resume rank 0's choice."""
    import json

    import torch
    import torch.multiprocessing as mp
    views = [tmp_path / 'rank0', tmp_path / 'rank1']
    for view, iters in zip(views, ([2], [2, 4])):
        view.mkdir()
        for i in iters:
            torch.save({}, view / f'iter_{i}.pth')
    mp.start_processes(_resume_worker, args=(str(tmp_path / 'init'), list(map(str, views)),
                                             str(tmp_path)), nprocs=2, start_method='fork')
    chosen = [json.loads((tmp_path / f'{rank}.json').read_text()) for rank in range(2)]
    assert chosen == [[str(views[0] / 'iter_2.pth')]] * 2


def test_adam_and_adamw_are_fused_where_every_parameter_is_on_a_gpu(tmp_path):
    """Issue 47 item 10: one kernel per step instead of one per tensor on CUDA; the CPU keeps
    torch's default, and a config's own ``fused`` wins."""
    from tests.gpu_semantics import as_gpu_model
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(tmp_path)
    runner = IrtboxRunner.from_cfg(cfg)

    def fused(optimizer=None, **wrapper):
        wrapper = dict(wrapper, optimizer=dict(cfg.optim_wrapper.optimizer, **(optimizer or {})))
        return runner.build_optim_wrapper(wrapper).optimizer.defaults.get('fused')
    assert not fused()  # on the CPU: torch's default
    as_gpu_model(runner.model)
    assert fused() is True
    assert fused(optimizer=dict(type='Adam')) is True
    assert fused(optimizer=dict(fused=False)) is False
    assert not fused(optimizer=dict(type='SGD', lr=0.1))  # AdamW and Adam only


def test_cudnn_benchmark_is_on_where_every_input_has_one_size(tmp_path, monkeypatch):
    """Issue 47 item 10: the default runtime's ``cudnn_benchmark='auto'``: on a GPU, on when
    every pipeline of the config gives one input size (cuDNN tunes once per shape: a landmark
    set of images of their own sizes would tune at every batch); off on a CPU. True / False
    force it."""
    import torch

    from tests.gpu_semantics import FakeCuda
    assert Config.fromfile(TINY).env_cfg.cudnn_benchmark == 'auto'
    saved = torch.backends.cudnn.benchmark
    try:
        torch.backends.cudnn.benchmark = False
        cfg = Config.fromfile(TINY)
        cfg.work_dir = str(tmp_path)
        runner = IrtboxRunner.from_cfg(cfg)
        assert torch.backends.cudnn.benchmark is False  # no GPU
        FakeCuda(monkeypatch, count=1, current=0)
        runner.setup_env(dict(cudnn_benchmark='auto'))
        assert torch.backends.cudnn.benchmark is True  # every image resized to 32 x 32
        torch.backends.cudnn.benchmark = False
        for loader in ('train_dataloader', 'test_dataloader'):
            varying = Config.fromfile(TINY)
            varying.work_dir = str(tmp_path)
            varying[loader].dataset.pipeline[1] = dict(type='Resize', scale=(32, 32),
                                                       keep_ratio=True)
            runner.cfg = varying
            runner.setup_env(dict(cudnn_benchmark='auto'))
            assert torch.backends.cudnn.benchmark is False, loader
        runner.cfg = Config.fromfile(TINY)
        runner.cfg.randomness = dict(seed=0, deterministic=True)  # MMEngine would turn it off
        runner.setup_env(dict(cudnn_benchmark='auto'))
        assert torch.backends.cudnn.benchmark is False
        runner.setup_env(dict(cudnn_benchmark=True))
        assert torch.backends.cudnn.benchmark is True
    finally:
        torch.backends.cudnn.benchmark = saved


def test_compile_in_the_config_compiles_the_backbone_and_necks(tmp_path, monkeypatch):
    """Issue 47 item 10: ``compile=True`` (or a dict of ``torch.compile`` arguments) compiles
    the retriever's backbone and necks in place (MMEngine's whole training step recompiled
    at every step: measured in the docs); absent or False, nothing is compiled; a model
    without a backbone gets MMEngine's."""
    import torch

    from irtbox.engine.hooks.utils import bare_model
    compiled = []

    def fake_compile(fn, **kwargs):
        owner = getattr(fn, '__self__', None)
        compiled.append((type(owner).__name__ if owner is not None else fn.__name__, kwargs))
        return fn
    monkeypatch.setattr(torch, 'compile', fake_compile)
    parts = ['TimmBackbone', 'Sequential']
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(tmp_path)
    cfg.train_cfg.update(max_iters=1, val_interval=100)
    cfg.compile = True
    runner = IrtboxRunner.from_cfg(cfg)
    runner.train()  # MMEngine's train() asks for it
    assert compiled == [(part, {}) for part in parts]
    assert not any(key.startswith('_orig_mod') for key in bare_model(runner).state_dict())
    for setting, expected in ((None, []), (False, []), (dict(mode='max-autotune'),
                                                        [(part, {'mode': 'max-autotune'})
                                                         for part in parts])):
        compiled.clear()
        runner.cfg.compile = setting
        runner.compile_model('train_step')
        assert compiled == expected, setting
    compiled.clear()
    runner.model = torch.nn.Linear(2, 2)
    runner.cfg.compile = True
    runner.compile_model('forward')
    assert compiled == [('Linear', {})]  # MMEngine's: the model's method


def test_the_runners_model_tests_in_bf16_as_the_config_trains(tmp_path, monkeypatch):
    """Issue 47 item 10: the runner sets its model's ``bf16_inference`` from the config, as
    ``init_model`` does (tests/test_apis/test_extract.py)."""
    from irtbox.engine.optim_wrappers import bf16_autocast
    monkeypatch.setattr(bf16_autocast, 'bf16_autocast_available', lambda: True)
    for wrapper, expected in (('OptimWrapper', False), ('BF16AutocastOptimWrapper', True)):
        cfg = Config.fromfile(TINY)
        cfg.work_dir = str(tmp_path / wrapper)
        cfg.optim_wrapper.type = wrapper
        assert IrtboxRunner.from_cfg(cfg).model.bf16_inference is expected


def test_the_environment_is_collected_only_where_the_log_shows_it(monkeypatch):
    """A rank > 0 logs errors only (no log file of its own): MMEngine's environment dump,
    which imports torchvision and runs the C compiler, is skipped there."""
    import logging
    collected = []
    monkeypatch.setattr(mmengine_runner, 'collect_env', lambda: collected.append(1) or {})
    runner = object.__new__(IrtboxRunner)
    runner._randomness_cfg, runner._seed, runner._launcher = {}, 0, 'pytorch'
    runner._distributed, runner._world_size, runner.cfg = True, 2, Config()
    shown = []
    for level in (logging.ERROR, logging.INFO):
        handler = logging.Handler(level)
        handler.emit = shown.append
        runner.logger = logging.getLogger(f'test_log_env_{level}')
        runner.logger.setLevel(logging.INFO)
        runner.logger.handlers = [handler]
        runner._log_env({})
        assert len(collected) == len(shown) == (level == logging.INFO)
