"""CPU latency of an exported model: onnxruntime and TorchScript against the PyTorch model they
were exported from, each contender in its own process.

  python tools/benchmarks/bench_export.py [--batch-sizes 1 32] [--threads 2] [--repeats 3]
                                          [--min-seconds 3]

Two models with random weights: the quick-start model (4-block ViT-Tiny, 32 x 32) and DeiT-S/224
(the IRT SOP config). Each is exported once by ``irtbox.deployment.export_model`` (ONNX by
tracing and TorchScript, both with a dynamic batch; the export's own numerical check runs
too). Then, per batch size, each contender process loads its model, runs one untimed call
(warm-up), and times calls on the same uint8 batch until --min-seconds have gone: p50 and p99
milliseconds per call, peak resident memory. The contenders take turns for --repeats rounds
(other load on the machine hits them alike) and the medians count. The ratio is to PyTorch
eager (``EmbeddingExport``, the exported graph's own reference) in the same run. Prints a
markdown table and the load average before and after.
"""
import argparse
import json
import os
import os.path as osp
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

from irtbox.utils.memory import peak_rss_mb
MODELS = {
    'vit-tiny/32': ('configs/quickstart/irt-r_vit-tiny_1xb64-500_digits.py', (32, 32)),
    'deit-s/224': ('configs/irt/irt-r_deit-s_1xb64-35k_sop.py', (224, 224)),
}
CONTENDERS = ('pytorch', 'onnxruntime', 'torchscript')


def build_model(name):
    from irtbox.apis import init_model
    config, _ = MODELS[name]
    import torch
    torch.manual_seed(0)
    return init_model(osp.join(ROOT, config), cfg_options={'model.backbone.pretrained': False})


def export(name, folder):
    """Write ``<folder>/<model>.onnx`` / ``.pt`` and the PyTorch state dict they come from."""
    import torch

    from irtbox.deployment import export_model
    from irtbox.utils.fileio import atomic_write
    model = build_model(name)
    tag = name.replace('/', '_')
    atomic_write(osp.join(folder, f'{tag}.pth'), lambda tmp: torch.save(model.state_dict(), tmp))
    for fmt, ext in (('onnx', 'onnx'), ('torchscript', 'pt')):
        export_model(model, fmt, osp.join(folder, f'{tag}.{ext}'), dynamic_batch=True,
                     log=lambda *_: None)


def runner(name, contender, folder):
    """A function mapping a uint8 NCHW numpy batch to embeddings."""
    import torch
    tag = name.replace('/', '_')
    if contender == 'onnxruntime':
        import onnxruntime
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()
        session = onnxruntime.InferenceSession(osp.join(folder, f'{tag}.onnx'), options,
                                               providers=['CPUExecutionProvider'])
        return lambda x: session.run(None, {'images': x})[0]
    if contender == 'torchscript':
        module = torch.jit.load(osp.join(folder, f'{tag}.pt'))
    else:
        from irtbox.deployment import EmbeddingExport
        model = build_model(name)
        model.load_state_dict(torch.load(osp.join(folder, f'{tag}.pth'), weights_only=True))
        module = EmbeddingExport(model).eval()

    def run(x):
        with torch.inference_mode():
            return module(torch.from_numpy(x)).numpy()
    return run


def time_one(name, contender, folder, batch, min_seconds):
    run = runner(name, contender, folder)
    _, (h, w) = MODELS[name]
    x = np.random.default_rng(0).integers(0, 256, (batch, 3, h, w), dtype=np.uint8)
    run(x)
    times = []
    while not times or sum(times) < min_seconds:
        started = time.perf_counter()
        run(x)
        times.append(time.perf_counter() - started)
    return dict(p50=1e3 * float(np.median(times)), p99=1e3 * float(np.percentile(times, 99)),
                calls=len(times),
                peak_mb=peak_rss_mb())


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--batch-sizes', type=int, nargs='+', default=[1, 32])
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--models', nargs='+', default=list(MODELS), choices=list(MODELS))
    parser.add_argument('--repeats', type=int, default=3, help='rounds; the median counts')
    parser.add_argument('--min-seconds', type=float, default=3.0,
                        help='a contender process repeats its call for this long')
    parser.add_argument('--one', nargs=4, help=argparse.SUPPRESS)  # model contender batch dir
    args = parser.parse_args()
    import torch
    torch.set_num_threads(args.threads)
    if args.one:
        name, contender, batch, folder = args.one
        print(json.dumps(time_one(name, contender, folder, int(batch), args.min_seconds)))
        return
    load_before = os.getloadavg()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            export(name, folder)
            for batch in args.batch_sizes:
                runs = {c: [] for c in CONTENDERS}
                for _ in range(args.repeats):
                    for contender in CONTENDERS:
                        out = subprocess.run(
                            [sys.executable, __file__, '--one', name, contender, str(batch),
                             folder, '--threads', str(args.threads), '--min-seconds',
                             str(args.min_seconds)], check=True, capture_output=True, text=True,
                            env=env)
                        runs[contender].append(json.loads(out.stdout.strip().splitlines()[-1]))
                for contender, done in runs.items():
                    rows.append((name, batch, contender, {
                        key: float(np.median([r[key] for r in done])) for key in ('p50', 'p99')
                    } | dict(peak_mb=max(r['peak_mb'] for r in done))))
    print(f'{args.threads} threads, median of {args.repeats} rounds; {os.cpu_count()} cores, '
          f'torch {torch.__version__}, load average (1 min) {load_before[0]:.2f} before, '
          f'{os.getloadavg()[0]:.2f} after\n')
    print('| model | batch | contender | p50 (ms) | p99 (ms) | p50 / PyTorch | peak RSS (MB) |')
    print('|---|---|---|---|---|---|---|')
    eager = {(n, b): r['p50'] for n, b, c, r in rows if c == 'pytorch'}
    for name, batch, contender, r in rows:
        print(f'| {name} | {batch} | {contender} | {r["p50"]:.2f} | {r["p99"]:.2f} | '
              f'{r["p50"] / eager[name, batch]:.2f} | {r["peak_mb"]:.0f} |')


if __name__ == '__main__':
    main()
