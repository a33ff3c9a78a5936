"""IRT_O vs IRT_L vs IRT_R on handwritten digits, end to end, like the paper's Table 3.

Prepares the digits dataset (classes 0-4 train, 5-9 test), evaluates the untrained
model (IRT_O), trains and evaluates IRT_L (contrastive + memory) and IRT_R (+ KoLeo),
each with tools/train.py and tools/test.py, then prints the three side by side and
writes them to WORK_DIR/results.json and results.csv.

  python tools/misc/quickstart_digits.py [--work-dir work_dirs/quickstart] [--iters 500]
"""
import argparse
import csv
import json
import os
import os.path as osp
import subprocess
import sys
import time

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, osp.join(ROOT, 'tools', 'dataset_converters'))

CONFIGS = osp.join(ROOT, 'configs', 'quickstart')
VARIANTS = [
    ('IRT_O', 'irt-o_vit-tiny_digits.py', False),
    ('IRT_L', 'irt-l_vit-tiny_1xb64-500_digits.py', True),
    ('IRT_R', 'irt-r_vit-tiny_1xb64-500_digits.py', True),
]
COLUMNS = [('recall@1', 'R@1'), ('recall@2', 'R@2'), ('recall@4', 'R@4'), ('recall@8', 'R@8'),
           ('map@r', 'MAP@R')]


def run(cmd):
    print('\n$ ' + ' '.join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--work-dir', default='work_dirs/quickstart')
    parser.add_argument('--data-root', default='data/digits')
    parser.add_argument('--iters', type=int, default=500, help='training iterations per model')
    args = parser.parse_args()
    from prepare_digits import prepare_digits

    start = time.time()
    counts = prepare_digits(osp.join(ROOT, args.data_root))
    print(f'digits: {counts["train"]} train images (0-4), {counts["test"]} test images (5-9) '
          f'in {args.data_root}')
    common = ['--cfg-options', f'train_dataloader.dataset.data_root={args.data_root}',
              f'test_dataloader.dataset.data_root={args.data_root}',
              f'val_dataloader.dataset.data_root={args.data_root}']
    results = {}
    for name, config, trains in VARIANTS:
        work_dir = osp.join(args.work_dir, name.lower())
        config = osp.join(CONFIGS, config)
        checkpoint = []
        if trains:
            run([sys.executable, 'tools/train.py', config, '--work-dir', work_dir, *common,
                 f'train_cfg.max_iters={args.iters}', f'train_cfg.val_interval={args.iters}',
                 f'default_hooks.checkpoint.interval={args.iters}'])
            checkpoint = [osp.join(work_dir, f'iter_{args.iters}.pth')]
        out = osp.join(work_dir, 'test_results.npz')
        test_opts = [o for o in common if not o.startswith('train_dataloader')]
        run([sys.executable, 'tools/test.py', config, *checkpoint, '--work-dir', work_dir,
             '--out', out, *test_opts])
        with open(osp.splitext(out)[0] + '.json') as f:
            results[name] = json.load(f)

    os.makedirs(args.work_dir, exist_ok=True)
    with open(osp.join(args.work_dir, 'results.json'), 'w') as f:
        json.dump(results, f, indent=2)
    with open(osp.join(args.work_dir, 'results.csv'), 'w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(['variant'] + [key for key, _ in COLUMNS])
        for name, metrics in results.items():
            writer.writerow([name] + [f'{metrics[key]:.4f}' for key, _ in COLUMNS])

    print(f'\nDigits 5-9 (unseen classes), leave-one-out, {time.time() - start:.0f} s in all; '
          f'results in {args.work_dir}/results.{{json,csv}}\n')
    print(f'{"":8}' + ''.join(f'{title:>8}' for _, title in COLUMNS))
    for name, metrics in results.items():
        print(f'{name:8}' + ''.join(f'{100 * metrics[key]:8.1f}' for key, _ in COLUMNS))
    gain = 100 * (results['IRT_R']['recall@1'] - results['IRT_O']['recall@1'])
    print(f'\nIRT_R - IRT_O Recall@1: {gain:+.1f} points')


if __name__ == '__main__':
    main()
