"""Fixtures shared by the test folders."""
import copy
import os
import os.path as osp

import pytest
import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def _without_process_size_costs():
    """Two MMEngine costs that grow with the test process, not with the code under test:
    serialising a dataset's sample list ends in ``gc.collect()``, a full collection whose time
    is proportional to every object the suite has made so far (seconds, late in a run; a few
    milliseconds in a user's process); and ``Config.pretty_text`` reformats the config with
    yapf (about a second per dump or log of it). Both stay as they are in the package; in the
    test process the collection is skipped and the config text is left unformatted (the same
    Python, loaded the same way)."""
    import types

    import mmengine.config.config as mmengine_config
    import mmengine.dataset.base_dataset as mmengine_dataset
    mmengine_dataset.gc = types.SimpleNamespace(collect=lambda *args: 0)
    mmengine_config.FormatCode = lambda text, style_config=None, **kwargs: (text, False)


def _share_the_cores_between_workers():
    """Under pytest-xdist, each worker's torch (and the processes its tests start, through
    OMP_NUM_THREADS) uses its share of the cores: two workers of two threads each on two
    cores spin against each other (OpenMP waits actively), several times slower."""
    workers = int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1'))
    if workers > 1:
        threads = max(1, (os.cpu_count() or 1) // workers)
        torch.set_num_threads(threads)
        os.environ.setdefault('OMP_NUM_THREADS', str(threads))


def _nccl_rules_in_every_rank():
    """The NCCL rules a CPU run can check (``tests/gpu_semantics.py``) in every process group
    the tests start, however its ranks start: forked ranks inherit them from this process;
    every process started from here (spawned, forkserver, a subprocess, a rehearsal's ranks)
    gets them through the environment (``sitecustomize`` of ``tests/gpu_semantics_site``)."""
    from tests.gpu_semantics import rank_env, rules_from_the_start
    os.environ.update(rank_env())
    rules_from_the_start()


def pytest_configure(config):
    _without_process_size_costs()
    _share_the_cores_between_workers()
    _nccl_rules_in_every_rank()
    config.addinivalue_line('markers', 'gpu: needs a CUDA device (skipped without one)')
    config.addinivalue_line('markers', 'slow: a test over ~0.3 s on 2 cores gets this mark; the '
                            'fast subset is -m "not slow"')


def pytest_collection_modifyitems(config, items):
    """Start the files that hold ``slow`` tests first (each file's tests kept together, so its
    fixtures are made once), so that under pytest-xdist the long multi-process tests do not
    run last on one worker while the other idles; skip the tests marked ``gpu`` on a machine
    without CUDA."""
    slow_files = {item.path for item in items if item.get_closest_marker('slow') is not None}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: order within a file kept
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason='needs a CUDA device')
    for item in items:
        if item.get_closest_marker('gpu') is not None:
            item.add_marker(skip)


@pytest.fixture(scope='session')
def tiny_ddp_run(tmp_path_factory):
    """The work dir of one ``tools/dist_train.sh`` run of tests/data/configs/tiny_irt.py on 2
    CPU processes (4 iterations), shared by the tests that read a plain DDP training (its
    ``iter_4.pth`` and log); ``(work_dir, output)``. Read-only."""
    import subprocess

    from tests.shared_runs import dist_train, once_per_run

    def train(folder):
        proc = dist_train(osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py'),
                          folder / 'work_dir', stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-5000:]
        (folder / 'output.txt').write_text(out)

    folder = once_per_run(tmp_path_factory, 'tiny_ddp_run', train)
    return str(folder / 'work_dir'), (folder / 'output.txt').read_text()


@pytest.fixture
def in_root(monkeypatch):
    """Run in the repository root, where the configs' relative data paths point."""
    monkeypatch.chdir(ROOT)
    return ROOT


@pytest.fixture(scope='session')
def digits_root(tmp_path_factory):
    """scikit-learn's digits written once per session by the quick start's converter
    (``irtbox.datasets.digits``): ``<root>/{train,test}/<digit>/*.png``.
    Tests copy what they need from it and must not change it."""
    pytest.importorskip('sklearn.datasets')
    from irtbox.datasets.digits import prepare_digits
    root = tmp_path_factory.mktemp('digits')
    prepare_digits(str(root))
    return root


def caching_timm_create(create):
    """``create`` (``timm.create_model``) through a cache: each distinct call creates the model
    once (random weights; a pretrained download is refused); later calls get a copy of it (a
    backbone may change its timm model, e.g. drop an unused position embedding)."""
    cache = {}

    def cached(name, pretrained=False, **kwargs):
        assert not pretrained, 'tests build random weights: nothing can be downloaded'
        key = (name, repr(sorted(kwargs.items())))
        if key not in cache:
            cache[key] = create(name, pretrained=False, **kwargs)
        return copy.deepcopy(cache[key])
    return cached


# A narrowed ResNet stem of a hybrid ViT: stages 8x narrower than the R50's, GroupNorm in 8 groups.
NARROW_STEM_CHANNELS, NARROW_STEM_WIDTH, NARROW_STEM_GROUPS = (32, 64, 128, 256), 16, 8


def narrow_hybrid_embed(layers, **kwargs):
    """A hybrid ViT's patch embedding (timm's ``HybridEmbed``) on a narrower ResNet-V2 stem,
    built as timm's ``_resnetv2`` builds the R50's (``layers`` blocks per stage, weight-
    standardised 'same' convolutions, no pre-activation): give ``functools.partial(
    narrow_hybrid_embed, (3, 4, 9))`` to ``timm.create_model`` as ``embed_layer``."""
    import functools

    from timm.layers import GroupNormAct, HybridEmbed, StdConv2dSame
    from timm.models.resnetv2 import ResNetV2
    stem = ResNetV2(layers=layers, channels=NARROW_STEM_CHANNELS[:len(layers)],
                    stem_chs=NARROW_STEM_WIDTH, num_classes=0, global_pool='', preact=False,
                    stem_type='same', conv_layer=functools.partial(StdConv2dSame, eps=1e-8),
                    norm_layer=functools.partial(GroupNormAct, num_groups=NARROW_STEM_GROUPS),
                    device=kwargs.get('device'), dtype=kwargs.get('dtype'))
    return HybridEmbed(backbone=stem, **kwargs)


@pytest.fixture(scope='module')
def timm_cache():
    """Route ``timm.create_model`` through a cache (:func:`caching_timm_create`) in this
    module's tests."""
    import timm
    create = timm.create_model
    timm.create_model = caching_timm_create(create)
    yield
    timm.create_model = create


@pytest.fixture(scope='session')
def _chromium_session():
    """One headless Chromium for the whole session (starting one takes seconds)."""
    import shutil
    if not (shutil.which('chromium') and shutil.which('chromedriver')):
        pytest.skip('chromium/chromedriver not installed (tools/run_tests.sh installs them with '
                    'apt-get where it can)')
    webdriver = pytest.importorskip('selenium.webdriver')
    from selenium.webdriver.chrome.service import Service
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv('SE_AVOID_STATS', 'true')  # no usage statistics sent by Selenium
        options = webdriver.ChromeOptions()
        for flag in ('--headless=new', '--no-sandbox', '--disable-dev-shm-usage',
                     '--window-size=1280,900', '--allow-file-access-from-files'):
            options.add_argument(flag)
        options.binary_location = shutil.which('chromium')
        driver = webdriver.Chrome(service=Service(shutil.which('chromedriver')), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def chromium(_chromium_session):
    """A headless Chromium driven by Selenium, for the pages' browser tests: the session's
    one, on a blank page with no cookies. Skipped when Debian's chromium / chromium-driver
    are missing (tools/run_tests.sh installs them with apt-get where it can) or selenium is
    not installed."""
    _chromium_session.get('about:blank')
    _chromium_session.delete_all_cookies()
    return _chromium_session


@pytest.fixture
def embedded_items(monkeypatch):
    """The items (image paths) ``extract_features`` and the sharded extraction embed from now
    on, in order: a spy on ``irtbox.apis.extract._embed_items`` that still embeds them."""
    import irtbox.apis.extract as extract_module
    embedded, embed = [], extract_module._embed_items

    def counting(model, items, *rest, **kwargs):
        embedded.extend(items)
        return embed(model, items, *rest, **kwargs)
    monkeypatch.setattr(extract_module, '_embed_items', counting)
    return embedded


@pytest.fixture
def warnings_logged():
    """Messages of the warnings irtbox logs through MMEngine's current logger (a test module
    may define its own of this name)."""
    import logging

    from mmengine.logging import MMLogger
    messages = []

    class Collect(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    logger = MMLogger.get_current_instance()
    handler = Collect(logging.WARNING)
    logger.addHandler(handler)
    yield messages
    logger.removeHandler(handler)
