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
    fake = tmp_path / 'srun'
    fake.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f'{tmp_path}:{os.environ["PATH"]}', **env)
    proc = subprocess.run(['bash', osp.join(ROOT, 'tools', script), *args], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.parametrize('script,args,command,parser', [
    ('slurm_train.sh', ['cfg.py', '--resume'], 'train', train_tool),
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


def test_usage_errors(tmp_path):
    for script in ('slurm_train.sh', 'slurm_test.sh', 'slurm_extract.sh', 'dist_train.sh',
                   'dist_test.sh', 'dist_extract.sh'):
        proc = subprocess.run(['bash', osp.join(ROOT, 'tools', script)], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 2 and 'usage:' in proc.stderr, script
