"""irtbox.utils.dist: the process group's set-up, and cross-rank gathering on two forked
gloo CPU processes."""
import datetime
import os

import pytest
import torch
import torch.distributed as torch_dist
import torch.multiprocessing as mp

from irtbox.utils import dist as dist_module
from irtbox.utils.dist import all_gather_cat, gather_round_robin, init_distributed


def _worker(rank, world_size, init_file, out_dir):
    torch.set_num_threads(1)  # no OpenMP thread pool in a forked child
    torch_dist.init_process_group('gloo', init_method=f'file://{init_file}', rank=rank,
                                  world_size=world_size)
    try:
        # A set of 7 rows, sharded as DefaultSampler does: rank r holds r, r + 2, ...,
        # rank 1 padded with row 0 again (the sampler's round-up to 8).
        rows = torch.arange(7.0)[:, None].repeat(1, 3)
        mine = list(range(rank, 7, world_size)) + ([0] if rank == 1 else [])
        padded = gather_round_robin(rows[mine], 7)
        # Without padding (indices[rank::world]) the shards differ in size.
        unpadded = gather_round_robin(rows[rank::world_size], 7)
        sizes = all_gather_cat(torch.full((rank + 1, 2), rank), torch.arange(rank + 1))
        torch.save(dict(padded=padded, unpadded=unpadded, sizes=sizes),
                   os.path.join(out_dir, f'{rank}.pth'))
    finally:
        torch_dist.destroy_process_group()


@pytest.mark.slow
def test_two_ranks(tmp_path):
    mp.start_processes(_worker, args=(2, str(tmp_path / 'init'), str(tmp_path)), nprocs=2,
                       start_method='fork')
    expected = torch.arange(7.0)[:, None].repeat(1, 3)
    for rank in range(2):
        out = torch.load(tmp_path / f'{rank}.pth')
        assert torch.equal(out['padded'], expected)
        assert torch.equal(out['unpadded'], expected)
        gathered, ids = out['sizes']
        assert gathered.tolist() == [[0, 0], [1, 1], [1, 1]]  # rank 0's 1 row, rank 1's 2
        assert ids.tolist() == [0, 0, 1]


@pytest.mark.parametrize('n', [3, 5])
def test_one_process_is_the_identity(n):
    x = torch.randn(5, 2)
    assert torch.equal(gather_round_robin(x, n), x[:n])
    assert all_gather_cat(x)[0] is x


@pytest.fixture
def started(monkeypatch):
    """The keyword arguments ``init_process_group`` is called with, instead of starting a
    group; the environment of a torchrun rank on a CPU-only machine."""
    calls = []
    monkeypatch.setattr(torch_dist, 'init_process_group', lambda **kwargs: calls.append(kwargs))
    monkeypatch.setattr(torch_dist, 'is_initialized', lambda: False)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    # Not for the test process: the kernel would signal it when its parent exits.
    monkeypatch.setattr(dist_module, 'exit_with_parent', lambda: None)
    for key, value in dict(RANK='0', WORLD_SIZE='2', LOCAL_RANK='0', MASTER_ADDR='127.0.0.1',
                           MASTER_PORT='29500').items():
        monkeypatch.setenv(key, value)
    return calls


def test_dist_cfg_reaches_init_process_group(started):
    init_distributed('pytorch', backend='mpi', timeout=1800, group_name='g')
    init_distributed('pytorch', timeout=datetime.timedelta(minutes=5))
    init_distributed('pytorch')
    assert started == [
        dict(backend='mpi', timeout=datetime.timedelta(seconds=1800), group_name='g'),
        dict(backend='gloo', timeout=datetime.timedelta(minutes=5)),
        dict(backend='gloo'),  # the backend's own default timeout
    ]


@pytest.mark.parametrize('timeout', ['30m', -1, True])
def test_a_bad_timeout_is_named(started, timeout):
    with pytest.raises(ValueError, match='dist_cfg.timeout must be a positive number of '
                                         rf'seconds, got {timeout!r}'):
        init_distributed('pytorch', timeout=timeout)
    assert started == []


def test_resolve_device_is_this_ranks_gpu_else_the_cpu(monkeypatch):
    """The one device rule, with CUDA simulated (rank 1's GPU current): a bare 'cuda' and None
    are this rank's GPU, never GPU 0; an index or the CPU stays as given; no CUDA: the CPU."""
    from tests.gpu_semantics import FakeCuda
    from irtbox.utils.dist import resolve_device
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    assert resolve_device() == torch.device('cpu')
    FakeCuda(monkeypatch, count=2, current=1)
    assert resolve_device() == resolve_device('cuda') == torch.device('cuda', 1)
    assert resolve_device(torch.device('cuda')) == torch.device('cuda', 1)
    assert resolve_device('cuda:0') == torch.device('cuda', 0)
    assert resolve_device('cpu') == torch.device('cpu')


def test_nccl_is_told_this_ranks_device(started, monkeypatch):
    """Issue 47 item 9: without ``device_id`` torch guesses rank % count, wrong where ranks
    are not laid out in blocks. CUDA simulated: LOCAL_RANK 5 of 4 visible GPUs is GPU 1."""
    from tests.gpu_semantics import FakeCuda
    FakeCuda(monkeypatch, count=4)
    monkeypatch.setenv('LOCAL_RANK', '5')
    init_distributed('pytorch')
    init_distributed('pytorch', backend='gloo')  # gloo binds no device
    assert started == [dict(backend='nccl', device_id=torch.device('cuda', 1)),
                       dict(backend='gloo')]
    assert torch.cuda.current_device() == 1
