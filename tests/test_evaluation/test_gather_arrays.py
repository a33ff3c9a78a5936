"""What the evaluation's gather sends (issue 47, item 7): blocks sized to the largest part, sent
to rank 0 only (before: a 2,450-byte part took four 32 MB all_gathers on every rank)."""
import json
import os

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _worker(rank, tmp):
    from irtbox.evaluation.metrics.gather import gather_arrays
    torch.set_num_threads(1)
    dist.init_process_group('gloo', init_method=f'file://{tmp}/init', rank=rank, world_size=2)
    counted = dict(sent=0, received=0)

    def counting(function):
        def wrapper(*args, **kwargs):
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            lists = [a for a in args if isinstance(a, list)]
            counted['sent'] += sum(t.numel() * t.element_size() for t in tensors)
            counted['received'] += sum(t.numel() * t.element_size() for ts in lists for t in ts)
            return function(*args, **kwargs)
        return wrapper

    for name in ('all_gather', 'gather', 'broadcast'):  # every tensor collective it might use
        setattr(dist, name, counting(getattr(dist, name)))
    try:
        rows = 3 if rank == 0 else 5  # 5 rows of 6 float32 + one int64: 140 bytes at most
        part = dict(embedding=np.full((rows, 6), rank, np.float32),
                    sample_idx=np.arange(rows, dtype=np.int64) * 2 + rank)
        out = gather_arrays(part)
        kept = None if out is None else [p['sample_idx'].tolist() for p in out]
        with open(os.path.join(tmp, f'{rank}.json'), 'w') as f:
            json.dump(dict(counted, kept=kept), f)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_a_small_part_sends_its_size_to_rank_0_only(tmp_path):
    mp.start_processes(_worker, args=(str(tmp_path), ), nprocs=2, start_method='fork')
    ranks = [json.loads((tmp_path / f'{r}.json').read_text()) for r in range(2)]
    assert ranks[0]['kept'] == [[0, 2, 4], [1, 3, 5, 7, 9]] and ranks[1]['kept'] is None
    largest = 5 * (6 * 4 + 8)  # both keys' blocks padded to the largest part, 5 rows
    for rank in ranks:
        assert rank['sent'] == largest, rank
    assert ranks[0]['received'] == 2 * largest and ranks[1]['received'] == 0, ranks
