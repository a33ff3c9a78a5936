"""What pinning the quick start's CPU code paths costs (tools/misc/quickstart_digits.py, PINNED_CPU),
and what it buys: training steps of the quick start's IRT_R model (4-block ViT-Tiny, 32x32 inputs,
batch 64, AdamW) on fixed random batches, one thread, each contender in its own process: the
machine's own paths, the pinned ones, and each of those on an emulated AVX2-only CPU (MKL's and
oneDNN's instruction sets and ATen's capability capped at AVX2). Prints a markdown table: seconds
per step, peak resident memory, the ratio to the fastest, and the weights' sha256 after the steps
(equal hashes: the same weights).

  python tools/benchmarks/bench_quickstart_pins.py [--steps 30] [--repeats 3]

``--child`` runs the steps in this process and prints ``<sha256> <seconds per step> <peak MB>``
(tests/test_tools/test_quickstart.py uses it with fewer, smaller steps).
"""
import argparse
import hashlib
import importlib.util
import os
import os.path as osp
import subprocess
import sys
import time

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    'quickstart_digits', osp.join(ROOT, 'tools', 'misc', 'quickstart_digits.py'))
quickstart = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(quickstart)

# What an AVX2-only CPU shows the libraries.
AVX2_CPU = {'ATEN_CPU_CAPABILITY': 'avx2', 'MKL_ENABLE_INSTRUCTIONS': 'AVX2', 'ONEDNN_MAX_CPU_ISA': 'AVX2'}


def contenders():
    """{name: environment}: this machine and an AVX2-only one, each unpinned and pinned."""
    pinned = quickstart.pinned_env(quickstart.TRAIN_THREADS)
    unpinned = {key: value for key, value in pinned.items() if key not in quickstart.PINNED_CPU}
    return {'this CPU': unpinned, 'AVX2-only CPU': dict(unpinned, **AVX2_CPU),
            'this CPU, pinned': pinned, 'AVX2-only CPU, pinned': dict(pinned, **AVX2_CPU)}


def train(steps, batch):
    """The steps, in this process; returns (sha256 of the weights, seconds a step, peak MB)."""
    import torch
    from mmengine.config import Config

    import irtbox.models  # noqa: F401  (registers the model's parts)
    from irtbox.registry import MODELS
    from irtbox.utils.memory import peak_rss_mb
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(
        osp.join(quickstart.CONFIGS, quickstart.TRAINED[1][1])).model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=5e-4)
    generator = torch.Generator().manual_seed(1)
    labels = torch.arange(4).repeat_interleave(batch // 4)
    started = time.perf_counter()
    for _ in range(steps):
        inputs = torch.rand(batch, 3, 32, 32, generator=generator) * 2 - 1
        losses = model.head.loss(model.extract_feat(inputs), labels)
        optimizer.zero_grad()
        sum(value for key, value in losses.items() if 'loss' in key).backward()
        optimizer.step()
    seconds = (time.perf_counter() - started) / steps
    weights = b''.join(v.numpy().tobytes() for v in model.state_dict().values())
    return hashlib.sha256(weights).hexdigest(), seconds, peak_rss_mb()


def run_child(env, steps, batch):
    """``train`` in a new process with ``env``: (sha256, seconds a step, peak MB)."""
    out = subprocess.run([sys.executable, __file__, '--child', '--steps', str(steps),
                          '--batch', str(batch)], env=dict(env, PYTHONPATH=ROOT), cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0], float(out[1]), float(out[2])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--steps', type=int, default=30)
    parser.add_argument('--batch', type=int, default=64)
    parser.add_argument('--repeats', type=int, default=3, help='runs per contender (best kept)')
    parser.add_argument('--child', action='store_true', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sha, seconds, peak = train(args.steps, args.batch)
        print(sha, f'{seconds:.6f}', f'{peak:.1f}')
        return
    rows = {}
    for _ in range(args.repeats):  # interleaved, so that a load change hits every contender
        for name, env in contenders().items():
            sha, seconds, peak = run_child(env, args.steps, args.batch)
            best = rows.get(name)
            rows[name] = (sha, min(seconds, best[1]) if best else seconds, peak)
    floor = min(seconds for _, seconds, _ in rows.values())
    print(f'{args.steps} steps of batch {args.batch}, best of {args.repeats}; load '
          f'{os.getloadavg()[0]:.1f}\n')
    print('| contender | s / step | peak MB | ratio | weights sha256 |\n|---|---|---|---|---|')
    for name, (sha, seconds, peak) in rows.items():
        print(f'| {name} | {seconds:.3f} | {peak:.0f} | {seconds / floor:.2f} | {sha[:12]} |')


if __name__ == '__main__':
    main()
