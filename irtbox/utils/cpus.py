"""The CPU cores this process may use, how many ranks of its job share them, and what else a
launcher reads of Slurm's environment (its per-node lists, the job's rendezvous port)."""
import os
import re
from typing import List, Optional

__all__ = ['usable_cpu_count', 'local_world_size', 'slurm_counts', 'job_port']


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
    Slurm's tasks on this node (``SLURM_NTASKS_PER_NODE``, or this node's entry, by
    ``SLURM_NODEID``, of the step's ``SLURM_STEP_TASKS_PER_NODE`` or the job's
    ``SLURM_TASKS_PER_NODE``, lists such as ``4(x2),3``), else 1."""
    env = os.environ if env is None else env
    for key in ('LOCAL_WORLD_SIZE', 'SLURM_NTASKS_PER_NODE'):
        value = env.get(key, '')
        if value.isdigit() and int(value) > 0:
            return int(value)
    per_node = slurm_counts(env.get('SLURM_STEP_TASKS_PER_NODE')
                            or env.get('SLURM_TASKS_PER_NODE', ''))
    node = env.get('SLURM_NODEID', '0')
    node = int(node) if node.isdigit() else 0
    return per_node[node] if node < len(per_node) and per_node[node] > 0 else 1


def slurm_counts(value: str) -> List[int]:
    """A Slurm per-node list (``SLURM_TASKS_PER_NODE``, ``SLURM_JOB_CPUS_PER_NODE``) expanded
    to one count per node: ``'4(x2),3'`` -> ``[4, 4, 3]``; ``[]`` when it is not one."""
    counts = []
    for entry in filter(None, value.split(',')):
        match = re.fullmatch(r'(\d+)(?:\(x(\d+)\))?', entry.strip())
        if match is None:
            return []
        counts += [int(match[1])] * int(match[2] or 1)
    return counts


def job_port(env=None) -> Optional[int]:
    """The rendezvous port of this Slurm job step, the same on each of its nodes and another
    for each job and step (a fixed 29500 made two jobs sharing a node collide):
    ``15000 + (16 * SLURM_JOB_ID + SLURM_STEP_ID) % 15000``, below Linux's ephemeral ports;
    None outside Slurm."""
    env = os.environ if env is None else env
    job, step = env.get('SLURM_JOB_ID', ''), env.get('SLURM_STEP_ID', '')
    if not job.isdigit():
        return None
    return 15000 + (16 * int(job) + (int(step) if step.isdigit() else 0)) % 15000
