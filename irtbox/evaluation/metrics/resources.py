"""What the rank that computes a metric searches with: its share of the node's CPU cores (its
device: :func:`irtbox.utils.dist.resolve_device`, this rank's own GPU).

Rank 0 searches while the other ranks wait in a collective, which fails past the process
group's timeout; so the search must use what this rank has, and only that.
"""
from contextlib import contextmanager
from typing import Iterator

import torch

from irtbox.utils.cpus import local_world_size, usable_cpu_count

__all__ = ['rank_thread_count', 'rank_threads']


def rank_thread_count() -> int:
    """The CPU threads this rank may use: the cores it may run on
    (:func:`~irtbox.utils.cpus.usable_cpu_count`, its affinity) shared among the node's
    ranks (:func:`~irtbox.utils.cpus.local_world_size`: torchrun's or Slurm's), at least 1.
    Where each rank is bound to cores of its own this undercounts, which wastes cores but
    never makes the ranks fight over them."""
    return max(1, usable_cpu_count() // local_world_size())


@contextmanager
def rank_threads() -> Iterator[int]:
    """Run the block with :func:`rank_thread_count` torch threads (yielded) and restore
    torch's thread count afterwards.

    torchrun sets OMP_NUM_THREADS=1 for its ranks, which would leave a metric's search on
    the CPU (torch's, and faiss's where it shares torch's OpenMP runtime) to one core while
    the other ranks wait. Also usable as a decorator.
    """
    before = torch.get_num_threads()
    threads = rank_thread_count()
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)
