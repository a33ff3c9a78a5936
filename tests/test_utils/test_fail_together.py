"""An error on rank 0 alone reaches the other ranks (``irtbox.utils.dist.fail_together``): in
each place where rank 0 works while the others wait in a collective, every rank exits within
seconds naming rank 0's error, though the process group's timeout is long.

On gloo a peer that exits makes the others fail at once, which hid these hangs: on NCCL
nothing tells them. So here the failing rank stays alive (its group open) after its error, as
a rank whose peers NCCL does not watch; the other rank must still stop by itself."""
import datetime
import json
import os
import time

import numpy as np
import pytest
import torch
import torch.distributed as torch_dist
import torch.multiprocessing as mp

from irtbox.utils.dist import PeerFailed, fail_together

_HOLD_S = 60  # how long the failing rank keeps its group open; the test needs far less


def _metric(rank, tmp):
    from irtbox.evaluation import RetrievalMetric
    from irtbox.structures import DataSample
    metric = RetrievalMetric(ks=(1, ))
    emb = torch.randn(4, 3)
    if rank == 0:
        emb[1, 0] = float('nan')  # rank 0's compute refuses the gathered embeddings
    metric.process(None, [DataSample(metainfo=dict(sample_idx=2 * i + rank)).set_gt_label(i % 2)
                          .set_embedding(emb[i]).to_dict() for i in range(4)])
    metric.evaluate(8)


def _extract(phase):
    def run(rank, tmp):
        from irtbox.apis import extract
        from irtbox.apis.identity import COMPARED
        identity = {key: 'x' for key in COMPARED}
        out = os.path.join(tmp, 'out')
        if phase == 'manifest':  # rank 0 finds an earlier extraction there
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, extract.SHARDS_MANIFEST), 'w') as f:
                json.dump({}, f)
        else:  # rank 0's shard holds non-finite embeddings
            def embed(*args, **kwargs):
                if rank == 0:
                    raise ValueError('shard 1/2: 1 of 1 images gave non-finite embeddings')
                return np.zeros((1, 2), np.float32), ['b'], []
            extract._embed_items = embed
        extract.extract_sharded(None, ['a', 'b'], out, shard_size=1, identity=identity,
                                progress=False)
    return run


def _checkpoint(rank, tmp):
    from types import SimpleNamespace

    from irtbox.engine.hooks.non_finite_loss import NonFiniteLossHook
    model = torch.nn.Linear(2, 2)
    if rank == 0:
        with torch.no_grad():
            model.weight[0, 0] = float('nan')
    runner = SimpleNamespace(model=model, iter=3, work_dir=tmp)
    NonFiniteLossHook().prepare_checkpoint(runner)


_PLACES = {'metric': _metric, 'manifest': _extract('manifest'), 'shards': _extract('shards'),
           'checkpoint': _checkpoint}


def _worker(rank, place, init_file, tmp):
    torch.set_num_threads(1)
    torch_dist.init_process_group('gloo', init_method=f'file://{init_file}', rank=rank,
                                  world_size=2, timeout=datetime.timedelta(minutes=10))
    started, error = time.monotonic(), None
    try:
        _PLACES[place](rank, tmp)
    except Exception as err:  # noqa: BLE001 (recorded for the test)
        error = f'{type(err).__name__}: {err}'
    with open(os.path.join(tmp, f'{rank}.json'), 'w') as f:
        json.dump(dict(error=error, seconds=time.monotonic() - started), f)
    if rank == 0:  # hold the group open until the other rank has stopped (or long)
        deadline = time.monotonic() + _HOLD_S
        while not os.path.exists(os.path.join(tmp, '1.json')) and time.monotonic() < deadline:
            time.sleep(0.05)
    os._exit(0)  # no teardown: a rank that waited in vain would hang in it


@pytest.mark.slow
@pytest.mark.parametrize('place, error', [
    ('metric', 'ValueError: RetrievalMetric: the model gave non-finite'),
    ('manifest', 'EarlierShardsError: rank 0: '),
    ('shards', 'ValueError: rank 0: shard 1/2: 1 of 1 images gave non-finite'),
    ('checkpoint', 'NonFiniteLossError: iteration 4: weight or buffer weight is not finite'),
])
def test_an_error_on_rank_0_alone_stops_every_rank_within_seconds(tmp_path, place, error):
    mp.start_processes(_worker, args=(place, str(tmp_path / 'init'), str(tmp_path)), nprocs=2,
                       start_method='fork')
    ranks = [json.loads((tmp_path / f'{r}.json').read_text()) for r in range(2)]
    assert ranks[0]['error'].startswith(error), ranks[0]
    assert ranks[1]['error'].startswith('PeerFailed: '), ranks[1]
    assert f'rank 0 failed ({error}' in ranks[1]['error'], ranks[1]
    assert ranks[1]['seconds'] < 10, ranks[1]


def test_one_process_raises_its_own_error():
    with pytest.raises(KeyError, match='x'):
        with fail_together('a step'):
            raise KeyError('x')
    with fail_together('a step'):
        pass
    assert issubclass(PeerFailed, RuntimeError)
