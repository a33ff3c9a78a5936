"""The CPU cores this process may use, and how many ranks of its job share them."""
import os

__all__ = ['usable_cpu_count', 'local_world_size']


def usable_cpu_count() -> int:
    """The cores this process may run on: its CPU affinity (what ``taskset``, Slurm's
    ``--cpus-per-task`` binding and container cpusets give it), not ``os.cpu_count()``,
    which counts every core of the machine. At least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform (macOS)
        return max(1, os.cpu_count() or 1)


def local_world_size(env=None) -> int:
    """How many ranks of this job run on this node: ``LOCAL_WORLD_SIZE`` (torchrun), else
    Slurm's tasks on this node (``SLURM_NTASKS_PER_NODE``, or this node's entry of
    ``SLURM_TASKS_PER_NODE`` such as ``4(x2)``), else 1."""
    env = os.environ if env is None else env
    for key in ('LOCAL_WORLD_SIZE', 'SLURM_NTASKS_PER_NODE'):
        value = env.get(key, '')
        if value.isdigit() and int(value) > 0:
            return int(value)
    per_node = env.get('SLURM_TASKS_PER_NODE', '')
    # "4(x2),3": this node's count is not known from the list alone; the first entry is
    # the most common (Slurm lists the nodes in order and packs them evenly).
    first = per_node.split(',')[0].split('(')[0]
    return int(first) if first.isdigit() and int(first) > 0 else 1
