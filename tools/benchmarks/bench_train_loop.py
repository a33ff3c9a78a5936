"""irtbox's training loop against a bare timm + PyTorch loop doing the same work, each in its own
process.

  python tools/benchmarks/bench_train_loop.py [--model deit_tiny_patch16_224] [--size 224]
      [--batch 32] [--iters 30] [--warmup 5] [--json out.json] [--md out.md]

Both train the same timm model from the same in-memory uint8 images (decoding is timed by
bench_train_input.py, not here): batches of ``--batch`` images, 4 per class; normalise with the
ImageNet mean / std; CLS token; L2; the contrastive loss (margin 0.5, no memory); AdamW.

- ``bare``: a ``for`` loop: index the images, stack, normalise, ``forward_features``,
  loss, ``backward``, ``step``.
- ``irtbox``: ``IrtboxRunner`` with ``IterBasedTrainLoop``: a dataset of the same images with
  ``PackRetrievalInputs``, ``MPerClassSampler``, ``ImgDataPreprocessor``, ``ImageRetriever``
  (``TimmBackbone``, ``ClsTokenPool``, ``EmbeddingHead`` + ``ContrastiveLoss``), the default
  hooks (timer, logger every 10 iterations, parameter scheduler, sampler seed; no checkpoint
  inside the timed window).

Time is measured from the start of iteration ``--warmup`` to the end of the last one, in the
process itself (model building and start-up are excluded). The table gives seconds per iteration
and the ratio to ``bare`` (1.00x = as fast) and the extra peak RSS of the loop.
"""
import argparse
import json
import os.path as osp
import sys
import tempfile
import time

import numpy as np

from irtbox.utils.benchmark import run_contender, write_report

MEAN = [123.675, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]
CONTENDERS = ('bare', 'irtbox')
PER_CLASS = 4


def make_images(count, size, seed=0):
    """``count`` uint8 H x W x 3 images and their labels (``PER_CLASS`` images per class)."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (count, size, size, 3), dtype=np.uint8)
    return images, np.arange(count) // PER_CLASS


def run_bare(args, images, labels):
    import timm
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    model = timm.create_model(args.model, pretrained=False, num_classes=0, img_size=args.size)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=5e-4)
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    rng = np.random.default_rng(0)
    classes = len(images) // PER_CLASS
    started = None
    for it in range(args.iters):
        if it == args.warmup:
            started = time.perf_counter()
        picked = rng.choice(classes, args.batch // PER_CLASS, replace=False)
        idx = (picked[:, None] * PER_CLASS + np.arange(PER_CLASS)).ravel()
        x = torch.from_numpy(images[idx]).permute(0, 3, 1, 2).float()
        x = (x - mean) / std
        y = torch.from_numpy(labels[idx])
        z = F.normalize(model.forward_features(x)[:, 0], dim=1)
        sims = z @ z.T
        same = y[:, None] == y[None, :]
        pos = same & ~torch.eye(len(y), dtype=torch.bool)
        loss = ((1 - sims)[pos].sum() + F.relu(sims - 0.5)[~same].sum()) / len(y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return time.perf_counter() - started


def run_irtbox(args, images, labels):
    from mmengine.config import Config
    from mmengine.dataset import BaseDataset
    from mmengine.hooks import Hook

    from irtbox.apis import register_all_modules
    from irtbox.engine import IrtboxRunner
    from irtbox.registry import DATASETS, HOOKS
    register_all_modules()

    @DATASETS.register_module()
    class BenchImages(BaseDataset):
        """The benchmark's in-memory images."""

        def load_data_list(self):
            return [dict(img=img, gt_label=int(y)) for img, y in zip(images, labels)]

        def get_gt_labels(self):
            return labels

    timer = {}

    @HOOKS.register_module()
    class WindowTimer(Hook):
        """Wall time from the start of iteration ``warmup`` to the end of training."""

        def before_train_iter(self, runner, batch_idx, data_batch=None):
            if runner.iter == args.warmup:
                timer['start'] = time.perf_counter()

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            if runner.iter + 1 == args.iters:
                timer['end'] = time.perf_counter()

    cfg = Config(dict(
        default_scope='irtbox',
        model=dict(
            type='ImageRetriever',
            data_preprocessor=dict(type='ImgDataPreprocessor', mean=MEAN, std=STD),
            backbone=dict(type='TimmBackbone', model_name=args.model, pretrained=False,
                          img_size=args.size),
            neck=[dict(type='ClsTokenPool')],
            head=dict(type='EmbeddingHead', losses=dict(
                contrastive=dict(type='ContrastiveLoss', margin=0.5)))),
        train_dataloader=dict(
            batch_size=args.batch, num_workers=0,
            sampler=dict(type='MPerClassSampler', batch_size=args.batch, m=PER_CLASS,
                         infinite=True),
            dataset=dict(type='BenchImages', pipeline=[dict(type='PackRetrievalInputs')])),
        optim_wrapper=dict(optimizer=dict(type='AdamW', lr=1e-4, weight_decay=5e-4)),
        train_cfg=dict(type='IterBasedTrainLoop', max_iters=args.iters),
        default_hooks=dict(
            timer=dict(type='IterTimerHook'), logger=dict(type='LoggerHook', interval=10),
            param_scheduler=dict(type='ParamSchedulerHook'),
            checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=args.iters + 1,
                            save_last=False),
            sampler_seed=dict(type='DistSamplerSeedHook')),
        custom_hooks=[dict(type='WindowTimer')],
        log_processor=dict(by_epoch=False, window_size=10),
        randomness=dict(seed=0),
        work_dir=args.work_dir))
    IrtboxRunner.from_cfg(cfg).train()
    return timer['end'] - timer['start']


def child(args):
    from irtbox.utils.memory import peak_rss_mb, reset_peak
    images, labels = make_images(args.images, args.size)
    run = run_bare if args.child == 'bare' else run_irtbox
    base = reset_peak()
    seconds = run(args, images, labels)
    timed = args.iters - args.warmup
    print(json.dumps(dict(contender=args.child, seconds=seconds, iters=timed,
                          per_iter=seconds / timed, extra_peak_mb=peak_rss_mb() - base)))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--model', default='deit_tiny_patch16_224', help='a timm ViT name')
    parser.add_argument('--size', type=int, default=224, help='input size')
    parser.add_argument('--batch', type=int, default=32, help='images per batch')
    parser.add_argument('--iters', type=int, default=30, help='iterations in all')
    parser.add_argument('--warmup', type=int, default=5, help='untimed first iterations')
    parser.add_argument('--images', type=int, default=256, help='images in memory')
    parser.add_argument('--json', help='write the results here')
    parser.add_argument('--md', help='write the markdown table here')
    parser.add_argument('--child', help=argparse.SUPPRESS)  # run one contender
    parser.add_argument('--work-dir', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.batch % PER_CLASS or args.images < args.batch or args.iters <= args.warmup:
        parser.error(f'need --batch a multiple of {PER_CLASS}, --images >= --batch and '
                     '--iters > --warmup')
    if args.child:
        child(args)
        return
    rows = []
    with tempfile.TemporaryDirectory() as work_dir:
        for name in CONTENDERS:
            command = [sys.executable, osp.abspath(__file__), '--child', name,
                       '--work-dir', work_dir] + sys.argv[1:]
            rows.append(run_contender(command, name))
    bare = rows[0]['per_iter']
    lines = ['| contender | timed iterations | s / iteration | / bare | extra peak RSS (MB) |',
             '|---|---|---|---|---|']
    for r in rows:
        lines.append(f'| {r["contender"]} | {r["iters"]} | {r["per_iter"]:.3f} | '
                     f'{r["per_iter"] / bare:.2f}x | {r["extra_peak_mb"]:.0f} |')
    write_report('\n'.join(lines), rows, args.json, args.md)


if __name__ == '__main__':
    main()
