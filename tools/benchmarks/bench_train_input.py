"""The training input pipeline against a bare OpenCV + numpy loop doing the same work, each in
its own process.

  python tools/benchmarks/bench_train_input.py [--images 1024] [--batch 64] [--size 500 375]
      [--json out.json] [--md out.md]

Both read the same synthetic JPEGs (``--images`` of ``--size``, one folder per class) once each,
single process (``num_workers=0``: the per-image cost, not the worker count), and produce the
same normalised float32 batches of 224 x 224 images: decode, resize to 256 x 256, random 224
crop, random horizontal flip, collate, normalise (``configs/_base_/datasets/pipelines_224.py``
and the ImageNet mean / std of the data preprocessors).

- ``irtbox``: ``FolderDataset`` with that ``train_pipeline`` in a torch ``DataLoader`` with
  MMEngine's ``pseudo_collate``, then ``ImgDataPreprocessor`` (stack, BGR to RGB, normalise).
- ``bare``: ``cv2.imread``, ``cv2.resize``, a numpy crop and flip, ``np.stack``, normalise in
  torch.

The table gives images per second and the time ratio to ``bare`` (1.00x = as fast).
"""
import argparse
import glob
import json
import os
import os.path as osp
import sys
import tempfile
import time

import numpy as np

from irtbox.utils.benchmark import run_contender, write_report

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
# The training pipeline timed, as the category-level configs use it.
PIPELINES = osp.join(ROOT, 'configs', '_base_', 'datasets', 'pipelines_224.py')

MEAN = [123.675, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]
CONTENDERS = ('bare', 'irtbox')


def make_images(folder, images, size, classes=16, seed=0):
    import cv2
    rng = np.random.default_rng(seed)
    width, height = size
    for i in range(images):
        path = osp.join(folder, f'class_{i % classes:02d}')
        os.makedirs(path, exist_ok=True)
        # Smooth random content (JPEG-compressible like a photo, not noise).
        small = rng.integers(0, 256, (height // 16, width // 16, 3), dtype=np.uint8)
        img = cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC)
        cv2.imwrite(osp.join(path, f'{i:05d}.jpg'), img, [cv2.IMWRITE_JPEG_QUALITY, 90])


def run_bare(folder, batch):
    import cv2
    import torch
    paths = sorted(glob_images(folder))
    rng = np.random.default_rng(0)
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    started = time.perf_counter()
    for start in range(0, len(paths), batch):
        crops = []
        for path in paths[start:start + batch]:
            img = cv2.resize(cv2.imread(path), (256, 256), interpolation=cv2.INTER_LINEAR)
            y, x = rng.integers(0, 33, 2)
            img = img[y:y + 224, x:x + 224]
            if rng.random() < 0.5:
                img = img[:, ::-1]
            crops.append(img)
        stacked = torch.from_numpy(np.stack(crops)[..., ::-1].copy())  # BGR -> RGB
        ((stacked.permute(0, 3, 1, 2).float() - mean) / std)
    return time.perf_counter() - started, len(paths)


def run_irtbox(folder, batch):
    from mmengine.config import Config
    from mmengine.dataset import pseudo_collate
    from mmengine.model import ImgDataPreprocessor
    from torch.utils.data import DataLoader

    from irtbox.apis import register_all_modules
    from irtbox.registry import DATASETS
    register_all_modules()
    pipeline = Config.fromfile(PIPELINES).train_pipeline
    dataset = DATASETS.build(dict(type='FolderDataset', data_root=folder, pipeline=pipeline))
    loader = DataLoader(dataset, batch_size=batch, collate_fn=pseudo_collate, num_workers=0)
    preprocessor = ImgDataPreprocessor(mean=MEAN, std=STD, bgr_to_rgb=True)
    started = time.perf_counter()
    for data in loader:
        preprocessor(data, training=True)
    return time.perf_counter() - started, len(dataset)


def glob_images(folder):
    return glob.glob(osp.join(folder, '*', '*.jpg'))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--images', type=int, default=1024)
    parser.add_argument('--batch', type=int, default=64)
    parser.add_argument('--size', type=int, nargs=2, default=[500, 375], help='width height')
    parser.add_argument('--json', help='write the results here')
    parser.add_argument('--md', help='write the markdown table here')
    parser.add_argument('--child', help=argparse.SUPPRESS)  # run one contender
    parser.add_argument('--data', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run = run_bare if args.child == 'bare' else run_irtbox
        seconds, images = run(args.data, args.batch)
        print(json.dumps(dict(seconds=seconds, images=images)))
        return
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        make_images(folder, args.images, args.size)
        for name in CONTENDERS:
            result = run_contender([sys.executable, osp.abspath(__file__), '--child', name,
                                    '--data', folder, '--batch', str(args.batch)], name)
            rows.append(dict(contender=name, **result))
    bare = rows[0]['seconds']
    lines = ['| contender | images | time (s) | images/s | / bare |', '|---|---|---|---|---|']
    for r in rows:
        lines.append(f'| {r["contender"]} | {r["images"]} | {r["seconds"]:.2f} | '
                     f'{r["images"] / r["seconds"]:.0f} | {r["seconds"] / bare:.2f}x |')
    write_report('\n'.join(lines), rows, args.json, args.md)


if __name__ == '__main__':
    main()
