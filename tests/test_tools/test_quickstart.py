"""The quick start prints the same numbers on every x86 CPU with AVX2, and the README prints them.

A CPU's code paths are emulated through the switches its libraries read (MKL's instruction set,
ATen's capability, oneDNN's ISA): a short training of the quick start's model under the quick
start's pins gives the same weights with AVX-512 as with AVX2 only.
"""
import importlib.util
import json
import os.path as osp
import re
import subprocess
import sys

import pytest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    'quickstart_digits', osp.join(ROOT, 'tools', 'misc', 'quickstart_digits.py'))
quickstart = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(quickstart)

RECORDED = osp.join(ROOT, 'tests', 'data', 'quickstart_run.json')
# What an AVX2-only CPU shows the libraries.
AVX2_CPU = {'ATEN_CPU_CAPABILITY': 'avx2', 'MKL_ENABLE_INSTRUCTIONS': 'AVX2', 'ONEDNN_MAX_CPU_ISA': 'AVX2'}
# Three AdamW steps of the quick start's IRT_R model on a fixed batch; prints the weights' sha256.
TRAIN = '''
import hashlib, torch
from mmengine.config import Config
import irtbox.models
from irtbox.registry import MODELS
torch.manual_seed(0)
model = MODELS.build(Config.fromfile(CONFIG).model)
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=5e-4)
generator = torch.Generator().manual_seed(1)
labels = torch.arange(4).repeat_interleave(4)
for _ in range(3):
    inputs = torch.rand(16, 3, 32, 32, generator=generator) * 2 - 1
    losses = model.head.loss(model.extract_feat(inputs), labels)
    optimizer.zero_grad()
    sum(value for key, value in losses.items() if 'loss' in key).backward()
    optimizer.step()
print(hashlib.sha256(b''.join(v.numpy().tobytes() for v in model.state_dict().values())).hexdigest())
'''


def train_in(envs):
    """The weights' sha256 after TRAIN in a process with each environment (run side by side)."""
    config = osp.join(quickstart.CONFIGS, quickstart.TRAINED[1][1])
    code = TRAIN.replace('CONFIG', repr(config))
    procs = [subprocess.Popen([sys.executable, '-c', code], env=dict(env, PYTHONPATH=ROOT), cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for env in envs]
    outs = [proc.communicate() for proc in procs]
    for proc, (_, err) in zip(procs, outs):
        assert proc.returncode == 0, err
    return [out.strip() for out, _ in outs]


def has_avx512():
    try:
        return ' avx512f' in open('/proc/cpuinfo').read()
    except OSError:
        return False


@pytest.mark.slow
def test_the_pinned_quick_start_trains_the_same_weights_with_avx512_as_with_avx2_only():
    pinned = quickstart.pinned_env(quickstart.TRAIN_THREADS)
    envs = [pinned, dict(pinned, **AVX2_CPU)]
    unpinned = {key: value for key, value in pinned.items() if key not in quickstart.PINNED_CPU}
    if has_avx512():  # the control: without the pins, the two CPUs train different weights
        envs += [unpinned, dict(unpinned, **AVX2_CPU)]
    hashes = train_in(envs)
    assert hashes[0] == hashes[1]
    if has_avx512():
        assert hashes[2] != hashes[3], 'the emulated AVX2 CPU changed nothing: the check is void'


def readme_table():
    """{variant: [R@1, R@2, R@4, R@8, MAP@R]} from the README's quick-start block."""
    text = open(osp.join(ROOT, 'README.md')).read()
    rows = re.findall(r'^(IRT_[OLR])((?:\s+\d+\.\d)+)\s*$', text, flags=re.M)
    return {name: [float(v) for v in values.split()] for name, values in rows}


def test_the_readme_prints_the_recorded_quick_start():
    with open(RECORDED) as f:
        run = json.load(f)
    keys = [key for key, _ in quickstart.COLUMNS]
    recorded = {name: [float(f'{metrics[key]:.1f}') for key in keys]  # as the quick start prints
                for name, metrics in run['results'].items()}
    assert readme_table() == recorded
    readme = open(osp.join(ROOT, 'README.md')).read()
    assert run['irt_r_weights_sha256'] in readme
