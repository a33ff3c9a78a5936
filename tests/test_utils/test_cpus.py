"""The cores a process may use (its affinity, not the machine's count) and the ranks of its
node, under torchrun and under Slurm."""
import os

import pytest

from irtbox.utils import cpus
from irtbox.utils.cpus import job_port
from irtbox.utils.dist import _slurm_env


def test_usable_cpus_follow_the_affinity(monkeypatch):
    """A job bound to 4 of 64 cores (taskset, a cgroup cpuset, Slurm's binding) has 4."""
    monkeypatch.setattr(os, 'cpu_count', lambda: 64)
    monkeypatch.setattr(os, 'sched_getaffinity', lambda pid: {0, 1, 2, 3})
    assert cpus.usable_cpu_count() == 4
    monkeypatch.delattr(os, 'sched_getaffinity')  # macOS
    assert cpus.usable_cpu_count() == 64


@pytest.mark.parametrize('env, expected', [
    (dict(LOCAL_WORLD_SIZE='4'), 4),
    (dict(SLURM_NTASKS_PER_NODE='8'), 8),
    (dict(SLURM_TASKS_PER_NODE='4(x2)'), 4),
    (dict(SLURM_TASKS_PER_NODE='2,1'), 2),
    # This node's entry of an uneven list, the step's list before the job's.
    (dict(SLURM_TASKS_PER_NODE='4(x2),3', SLURM_NODEID='2'), 3),
    (dict(SLURM_TASKS_PER_NODE='4(x2),3', SLURM_NODEID='1'), 4),
    (dict(SLURM_STEP_TASKS_PER_NODE='2(x3)', SLURM_TASKS_PER_NODE='8(x3)', SLURM_NODEID='1'), 2),
    (dict(), 1),
    (dict(LOCAL_WORLD_SIZE='zero'), 1),
])
def test_local_world_size(env, expected):
    assert cpus.local_world_size(env) == expected


def test_the_slurm_launcher_sets_local_world_size(monkeypatch):
    """torchrun sets LOCAL_WORLD_SIZE and Slurm does not: without it each of 4 ranks of a
    node took every core for its search."""
    # A copy: what _slurm_env sets (RANK, ...) must not reach the tests after this one.
    monkeypatch.setattr(os, 'environ', {k: v for k, v in os.environ.items() if k not in (
        'LOCAL_WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT')})
    monkeypatch.setenv('SLURM_PROCID', '5')
    monkeypatch.setenv('SLURM_NTASKS', '8')
    monkeypatch.setenv('SLURM_LOCALID', '1')
    monkeypatch.setenv('SLURM_NODELIST', 'node[1-2]')
    monkeypatch.setenv('SLURM_TASKS_PER_NODE', '4(x2)')
    monkeypatch.setattr('irtbox.utils.dist.subprocess.getstatusoutput',
                        lambda command: (0, 'node1'))
    _slurm_env()
    assert (os.environ['LOCAL_WORLD_SIZE'], os.environ['LOCAL_RANK'], os.environ['RANK']) == \
        ('4', '1', '5')


def test_the_slurm_master_is_the_steps_first_node_on_a_port_of_the_job(monkeypatch):
    """Issue 47 item 9: MASTER_ADDR came from the job's node list (a step on some of its nodes
    has another first node) and every job used port 29500, so two jobs on one node collided."""
    monkeypatch.setattr(os, 'environ', {k: v for k, v in os.environ.items() if k not in (
        'LOCAL_WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT')})
    for key, value in dict(SLURM_PROCID='0', SLURM_NTASKS='2', SLURM_LOCALID='0',
                           SLURM_NODELIST='node[1-4]', SLURM_STEP_NODELIST='node[3-4]',
                           SLURM_JOB_ID='123456', SLURM_STEP_ID='2').items():
        monkeypatch.setenv(key, value)
    asked = []
    monkeypatch.setattr('irtbox.utils.dist.subprocess.getstatusoutput',
                        lambda command: asked.append(command) or (0, 'node3\nnode4'))
    _slurm_env()
    assert asked == ['scontrol show hostnames node[3-4]']
    assert os.environ['MASTER_ADDR'] == 'node3'
    port = int(os.environ['MASTER_PORT'])
    assert port == 15000 + (16 * 123456 + 2) % 15000 and port != 29500
    assert job_port(dict(SLURM_JOB_ID='123457', SLURM_STEP_ID='2')) != port  # the next job
    assert job_port(dict(SLURM_JOB_ID='123456', SLURM_STEP_ID='3')) != port  # another step
    assert job_port({}) is None
