"""The Slurm launchers forward their arguments to srun and the tool (a stand-in srun prints
its command line); the torchrun ones are run for real in test_dist_train.py and
test_extract_tool.py."""
import os
import os.path as osp
import subprocess

import pytest

from irtbox.cli import extract as extract_tool
from irtbox.cli import test as test_tool
from irtbox.cli import train as train_tool

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def run_with_fake_srun(tmp_path, script, *args, **env):
    for name in ('srun', 'sbatch'):  # stand-ins printing their arguments, one a line
        fake = tmp_path / name
        fake.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
        fake.chmod(0o755)
    fake = tmp_path / 'scontrol'  # scontrol show hostnames: the job's first node is n1
    fake.write_text('#!/bin/sh\necho n1; echo n2\n')
    fake.chmod(0o755)
    env = dict({k: v for k, v in os.environ.items() if not k.startswith('SLURM_')},
               PATH=f'{tmp_path}:{os.environ["PATH"]}', **env)
    proc = subprocess.run(['bash', osp.join(ROOT, 'tools', script), *args], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.parametrize('script,args,command,parser', [
    ('slurm_test.sh', ['cfg.py', 'ck.pth', '--out', 'r.npz'], 'test', test_tool),
    ('slurm_extract.sh', ['cfg.py', 'ck.pth', 'imgs', 'out', '--resume'], 'extract',
     extract_tool)])
def test_slurm_scripts_forward_everything(tmp_path, script, args, command, parser):
    argv = run_with_fake_srun(tmp_path, script, 'gpu', 'job', *args, GPUS='16',
                              SRUN_ARGS='--qos=high --time=1:00:00')
    assert argv[:3] == ['-p', 'gpu', '--job-name=job']
    assert '--ntasks=16' in argv and '--qos=high' in argv and '--time=1:00:00' in argv
    assert argv[argv.index('-u') + 1:argv.index('-u') + 4] == ['-m', 'irtbox', command]
    tool_args = argv[argv.index(command) + 1:]
    assert tool_args == ['--launcher', 'slurm', *args]
    parsed = parser.parse_args(tool_args)  # the tool reads them as meant
    assert parsed.launcher == 'slurm' and parsed.config == 'cfg.py'


def test_slurm_train_submits_a_requeueable_job_then_runs_torchrun_per_node(tmp_path):
    env = dict(GPUS='16', SBATCH_ARGS='--qos=high --time=1:00:00')
    argv = run_with_fake_srun(tmp_path, 'slurm_train.sh', 'gpu', 'job', 'cfg.py', '--amp', **env)
    # Outside a job: sbatch of this script (its arguments kept) as a requeueable job warned
    # by SIGUSR1 120 s before its end, one task (one torchrun agent) per node.
    assert argv[:4] == ['--parsable', '-p', 'gpu', '--job-name=job']
    for option in ('--nodes=2', '--ntasks-per-node=1', '--gres=gpu:8', '--requeue',
                   '--signal=USR1@120', '--qos=high', '--time=1:00:00'):
        assert option in argv, option
    assert argv[-4:] == ['gpu', 'job', 'cfg.py', '--amp']
    assert argv[-5].endswith('slurm_train.sh')
    # In the job: srun runs `irtbox train --nproc GPUS_PER_NODE` with the c10d rendezvous on
    # the first node on the job's own port (a fixed 29500 collided with another job's), the
    # job id as the rendezvous id, and restarts.
    argv = run_with_fake_srun(tmp_path, 'slurm_train.sh', 'gpu', 'job', 'cfg.py', '--amp',
                              GPUS='16', SLURM_JOB_ID='77', SLURM_NNODES='2',
                              SLURM_JOB_NODELIST='n[1-2]', MAX_RESTARTS='2')
    assert '--ntasks-per-node=1' in argv
    tool_args = argv[argv.index('train') + 1:]
    assert tool_args == ['cfg.py', '--nproc', '8', '--nnodes', '2', '--rdzv-endpoint',
                         'n1:16232', '--rdzv-id', '77', '--max-restarts', '2', '--amp']
    parsed = train_tool.parse_args(tool_args)
    assert (parsed.launcher, parsed.nproc, parsed.max_restarts, parsed.amp) == \
        ('none', 8, 2, True)


def test_usage_errors(tmp_path):
    for script in ('slurm_train.sh', 'slurm_test.sh', 'slurm_extract.sh', 'dist_train.sh',
                   'dist_test.sh', 'dist_extract.sh'):
        proc = subprocess.run(['bash', osp.join(ROOT, 'tools', script)], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 2 and 'usage:' in proc.stderr, script
