"""The quick start prints the same numbers on every x86 CPU with AVX2, and the README prints them.

A CPU's code paths are emulated through the switches its libraries read (MKL's instruction set,
ATen's capability, oneDNN's ISA): a short training of the quick start's model under the quick
start's pins gives the same weights with AVX-512 as with AVX2 only (the training is the one of
tools/benchmarks/bench_quickstart_pins.py, which also measures what the pins cost).
"""
import importlib.util
import json
import os.path as osp
import re
import subprocess
import sys

import pytest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
RECORDED = osp.join(ROOT, 'tests', 'data', 'quickstart_run.json')
BENCH = osp.join(ROOT, 'tools', 'benchmarks', 'bench_quickstart_pins.py')
_spec = importlib.util.spec_from_file_location('bench_quickstart_pins', BENCH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
quickstart = bench.quickstart  # tools/misc/quickstart_digits.py


def train_in(envs):
    """The weights' sha256 after three small training steps in a process with each environment,
    the processes side by side."""
    procs = [subprocess.Popen([sys.executable, BENCH, '--child', '--steps', '3', '--batch', '16'],
                              env=dict(env, PYTHONPATH=ROOT), cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for env in envs]
    outs = [proc.communicate() for proc in procs]
    for proc, (_, err) in zip(procs, outs):
        assert proc.returncode == 0, err
    return [out.split()[0] for out, _ in outs]


def has_avx512():
    try:
        return ' avx512f' in open('/proc/cpuinfo').read()
    except OSError:
        return False


@pytest.mark.slow
def test_the_pinned_quick_start_trains_the_same_weights_with_avx512_as_with_avx2_only():
    envs = bench.contenders()
    names = ['this CPU, pinned', 'AVX2-only CPU, pinned']
    if has_avx512():  # the control: without the pins, the two CPUs train different weights
        names += ['this CPU', 'AVX2-only CPU']
    hashes = train_in([envs[name] for name in names])
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
