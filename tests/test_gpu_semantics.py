"""The CPU simulation of GPU rules itself (``tests/gpu_semantics.py``): on in every rank
however it starts, and the cross-rank checks that NCCL would turn into a hang or garbage."""
import json
import os
import subprocess
import sys
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.gpu_semantics import WAIT_VAR, host_reads

_SCENARIOS = {
    # every rank the same: passes
    'agree': lambda rank: dist.all_reduce(torch.ones(3)),
    # the same collective, another shape on rank 1 (NCCL: garbage or a hang)
    'shape': lambda rank: dist.all_reduce(torch.ones(3 if rank == 0 else 4)),
    # another collective on rank 1
    'op': lambda rank: (dist.all_reduce(torch.ones(3)) if rank == 0
                        else dist.broadcast(torch.ones(3), src=0)),
    # a collective rank 1 never issues: it does its own work and leaves
    'some': lambda rank: dist.barrier() if rank == 0 else time.sleep(1),
    # point-to-point, which the rules refuse
    'send': lambda rank: dist.send(torch.ones(1), dst=1) if rank == 0 else None,
}


def _worker(rank, scenario, tmp):
    torch.set_num_threads(1)
    dist.init_process_group('gloo', init_method=f'file://{tmp}/init', rank=rank, world_size=2)
    started, error = time.monotonic(), None
    try:
        _SCENARIOS[scenario](rank)
    except Exception as err:  # noqa: BLE001 (recorded for the test)
        error = f'{type(err).__name__}: {err}'
    with open(os.path.join(tmp, f'{rank}.json'), 'w') as f:
        json.dump(dict(error=error, seconds=time.monotonic() - started), f)
    os._exit(0)


def _run(tmp_path, scenario, start_method='fork'):
    mp.start_processes(_worker, args=(scenario, str(tmp_path)), nprocs=2,
                       start_method=start_method)
    return [json.loads((tmp_path / f'{r}.json').read_text()) for r in range(2)]


@pytest.mark.slow
@pytest.mark.parametrize('scenario, rank_0, rank_1', [
    ('agree', None, None),
    ('shape', 'rank 0 issued all_reduce of a (3,) float32 tensor while rank 1 issued '
     'all_reduce of a (4,) float32 tensor',
     'rank 1 issued all_reduce of a (4,) float32 tensor while rank 0 issued all_reduce'),
    ('op', 'while rank 1 issued broadcast of a (3,) float32 tensor',
     'while rank 0 issued all_reduce of a (3,) float32 tensor'),
    ('some', 'rank 0 issued barrier; not every rank issued a collective', None),
    ('send', 'torch.distributed.send: point-to-point on NCCL', None),
])
def test_ranks_compare_each_collective(tmp_path, scenario, rank_0, rank_1):
    ranks = _run(tmp_path, scenario)
    for expected, got in zip((rank_0, rank_1), ranks):
        if expected is None:
            assert got['error'] is None, got
        else:
            assert got['error'].startswith('NcclRuleBroken: ') and expected in got['error'], got
    assert ranks[0]['seconds'] < 30, ranks  # not the process group's timeout


@pytest.mark.slow
def test_the_rules_are_on_in_spawned_ranks(tmp_path):
    """Not forked from the test process: they get the rules through the environment."""
    ranks = _run(tmp_path, 'shape', start_method='spawn')
    assert 'NcclRuleBroken: rank 0 issued all_reduce of a (3,)' in ranks[0]['error'], ranks


@pytest.mark.slow
def test_the_rules_are_on_in_a_started_process(tmp_path):
    code = ('import torch.distributed as d; '
            f'd.init_process_group("gloo", init_method="file://{tmp_path}/init", rank=0, '
            'world_size=1); print(d.send.__qualname__)')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith('nccl_rules.'), out
    assert os.environ.get(WAIT_VAR) is None  # the default wait, not a shorter one here


def test_host_reads_sees_the_ops_that_wait_for_a_device_tensor():
    x = torch.arange(6.0)
    with host_reads() as reads:
        x.sum().item()
        torch.unique(x)
        x.nonzero()
        x[x > 2]
        x[x > 4] = 0
        x.cpu()
        x.numpy()
        x.tolist()
        int(x[1])
    assert [r.op for r in reads] == ['item', 'unique', 'nonzero', '__getitem__', '__setitem__',
                                     'cpu', 'numpy', 'tolist', '__int__']
    assert reads[0].where.startswith(__file__)
    assert reads == ['read'] * 9


def test_host_reads_leaves_out_what_a_gpu_run_holds_on_the_host():
    x = torch.arange(6.0)
    with host_reads() as reads:
        n = torch.tensor([len(x)])  # made on the host
        n.tolist()
        (n * 2).item()
        x.cpu()  # the copy is the read (on the CPU it is x itself: a read of it counts again)
        torch.zeros(2, device=x.device).tolist()  # made on the device
    assert [r.op for r in reads] == ['cpu', 'tolist'], reads
