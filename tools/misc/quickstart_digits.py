"""IRT_O vs IRT_L vs IRT_R on handwritten digits, end to end, like the paper's Table 3.

Prepares the digits dataset (classes 0-4 train, 5-9 test), evaluates the untrained
model (IRT_O), trains IRT_L (contrastive loss) and IRT_R (+ KoLeo) with
tools/train.py, evaluates both with tools/test.py, then prints the three side by
side and writes them to WORK_DIR/results.json and results.csv.

IRT_R's test also draws 30 queries with their top 8 (--show-dir): result grids, a results
browser WORK_DIR/irt_r/show/index.html (open it from the file system) and failures.csv.

Finally it publishes IRT_R into a local model zoo (WORK_DIR/zoo, with
tools/misc/publish_model.py) and prints how to load it with ``get_model``.

The two trainings run at the same time, one CPU thread each (on 2 cores this is
faster than one after the other with 2 threads); each one's progress lines are
shown with its name, and its full output is kept in WORK_DIR/<variant>/stdout.log.

Every process runs with the CPU code paths pinned (PINNED_CPU) and a fixed number of threads,
so that every x86 CPU with AVX2 prints the same table and the same weights sha256
(docs/get_started.md, "The quick start's numbers").

  python tools/misc/quickstart_digits.py [--work-dir work_dirs/quickstart] [--iters 500]
"""
import argparse
import csv
import json
import os
import os.path as osp
import subprocess
import sys
import threading
import time

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

CONFIGS = osp.join(ROOT, 'configs', 'quickstart')
UNTRAINED = ('IRT_O', 'irt-o_vit-tiny_digits.py')
TRAINED = [('IRT_L', 'irt-l_vit-tiny_1xb64-500_digits.py'),
           ('IRT_R', 'irt-r_vit-tiny_1xb64-500_digits.py')]
COLUMNS = [('recall@1', 'R@1'), ('recall@2', 'R@2'), ('recall@4', 'R@4'), ('recall@8', 'R@8'),
           ('map@r', 'MAP@R')]
ZOO_NAME = 'irt-r_vit-tiny_digits'
SHOW_SUBDIR = osp.join('irt_r', 'show')  # IRT_R's result grids and results browser
SHOWN = ('Iter(', 'Error', 'Traceback', 'results written')
# What the numbers depend on besides the code: ATen's vectorised kernels, MKL's matrix products and
# oneDNN's convolutions each pick a code path by the CPU (AVX-512 and AVX2 round differently), and
# parallel reductions split by the number of threads. Pinned at AVX2, which every x86 CPU since
# 2015 has (measured cost and the check: docs/benchmarks.md, tests/test_tools/test_quickstart.py).
PINNED_CPU = {'ATEN_CPU_CAPABILITY': 'avx2', 'MKL_CBWR': 'AVX2', 'ONEDNN_MAX_CPU_ISA': 'AVX2'}
TRAIN_THREADS, TEST_THREADS = 1, 2


def pinned_env(threads):
    """The environment of a quick-start process: this one's, with the CPU paths and threads pinned."""
    return dict(os.environ, **PINNED_CPU, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))


def start(name, cmd, log_path, threads):
    """Start ``cmd``; echo its progress lines prefixed with ``name``; keep all in ``log_path``."""
    env = pinned_env(threads)
    os.makedirs(osp.dirname(log_path), exist_ok=True)
    print(f'[{name}] $ ' + ' '.join(cmd), flush=True)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)

    def pump():
        with open(log_path, 'a') as log:
            for line in proc.stdout:
                log.write(line)
                if any(key in line for key in SHOWN):
                    print(f'[{name}] {line.rstrip()}', flush=True)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return proc, thread, log_path


def wait(name, job):
    proc, thread, log_path = job
    code = proc.wait()
    thread.join()
    if code != 0:
        raise SystemExit(f'[{name}] failed with exit code {code}; full output in {log_path}')


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--work-dir', default='work_dirs/quickstart')
    parser.add_argument('--data-root', default='data/digits')
    parser.add_argument('--iters', type=int, default=500, help='training iterations per model')
    args = parser.parse_args()
    from irtbox.datasets.digits import prepare_digits

    start_time = time.time()
    counts = prepare_digits(osp.join(ROOT, args.data_root))
    print(f'digits: {counts["train"]} train images (0-4), {counts["test"]} test images (5-9) '
          f'in {args.data_root}', flush=True)
    data = [f'{loader}.dataset.data_root={args.data_root}'
            for loader in ('val_dataloader', 'test_dataloader')]

    def test(name, config, checkpoint=(), extra=()):
        work_dir = osp.join(args.work_dir, name.lower())
        out = osp.join(work_dir, 'test_results.npz')
        wait(name, start(name, [sys.executable, 'tools/test.py', config, *checkpoint,
                                '--work-dir', work_dir, '--out', out, *extra,
                                '--cfg-options', *data],
                         osp.join(work_dir, 'stdout.log'), TEST_THREADS))
        with open(osp.splitext(out)[0] + '.json') as f:
            return json.load(f)

    results = {UNTRAINED[0]: test(UNTRAINED[0], osp.join(CONFIGS, UNTRAINED[1]))}
    jobs = {}
    for name, config in TRAINED:
        work_dir = osp.join(args.work_dir, name.lower())
        jobs[name] = start(name, [
            sys.executable, 'tools/train.py', osp.join(CONFIGS, config), '--work-dir', work_dir,
            '--cfg-options', f'train_dataloader.dataset.data_root={args.data_root}', *data,
            f'train_cfg.max_iters={args.iters}', f'train_cfg.val_interval={args.iters}',
            f'default_hooks.checkpoint.interval={args.iters}'
        ], osp.join(work_dir, 'stdout.log'), TRAIN_THREADS)
    for name, job in jobs.items():
        wait(name, job)
    for name, config in TRAINED:
        checkpoint = osp.join(args.work_dir, name.lower(), f'iter_{args.iters}.pth')
        extra = ['--show-dir', osp.join(args.work_dir, SHOW_SUBDIR), '--show-num', '30'] \
            if name == 'IRT_R' else []
        results[name] = test(name, osp.join(CONFIGS, config), [checkpoint], extra)

    os.makedirs(args.work_dir, exist_ok=True)
    with open(osp.join(args.work_dir, 'results.json'), 'w') as f:
        json.dump(results, f, indent=2)
    with open(osp.join(args.work_dir, 'results.csv'), 'w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(['variant'] + [key for key, _ in COLUMNS])
        for name, metrics in results.items():
            writer.writerow([name] + [f'{metrics[key]:.2f}' for key, _ in COLUMNS])

    print(f'\nDigits 5-9 (unseen classes), leave-one-out, {time.time() - start_time:.0f} s in all; '
          f'results in {args.work_dir}/results.{{json,csv}}\n')
    print(f'{"":8}' + ''.join(f'{title:>8}' for _, title in COLUMNS))
    for name, metrics in results.items():
        print(f'{name:8}' + ''.join(f'{metrics[key]:8.1f}' for key, _ in COLUMNS))
    gain = results['IRT_R']['recall@1'] - results['IRT_O']['recall@1']
    print(f'\nIRT_R - IRT_O Recall@1: {gain:+.1f} points')
    browser = osp.join(args.work_dir, SHOW_SUBDIR, 'index.html')
    print(f"IRT_R's results browser: {browser} (result grids and failures.csv beside it)")
    publish(args.work_dir, osp.join(args.work_dir, 'irt_r', f'iter_{args.iters}.pth'),
            osp.join(CONFIGS, TRAINED[1][1]))


def publish(work_dir, checkpoint, config):
    """IRT_R into the local zoo WORK_DIR/zoo, and how to load it from there."""
    zoo = osp.join(work_dir, 'zoo')
    print(f'\nPublishing IRT_R into the local model zoo {zoo}:', flush=True)
    cmd = [sys.executable, 'tools/misc/publish_model.py', checkpoint, zoo, '--config', config,
           '--name', ZOO_NAME]
    print('$ ' + ' '.join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)
    index = osp.join(zoo, 'model-index.yml')
    print(f'\nLoad it from Python (offline, sha256-checked):\n'
          f'  IRTBOX_MODEL_INDEX={index} python -c "from irtbox.apis import get_model; '
          f"print(get_model('{ZOO_NAME}'))\"")


if __name__ == '__main__':
    main()
