"""scikit-learn's handwritten digits as a class-disjoint retrieval dataset on disk.

The 1,797 8x8 digit images bundled with scikit-learn are upscaled to SIZE x SIZE
PNG files in the generic folder format::

    OUT/train/<digit>/<index>.png   digits 0-4 (training classes)
    OUT/test/<digit>/<index>.png    digits 5-9 (unseen test classes)

plus OUT/benchmark_split.csv, the same images split for the training-recipe
benchmark's examples (CSVDataset format ``path,label,split``): digits 0-6 are
the 'train' split (its first 5 classes train, the last 2 validate: 5 digits are too few
for both), 7-9 the 'test' split.
"""
import os
import os.path as osp

__all__ = ['BENCHMARK_SPLIT', 'prepare_digits']

BENCHMARK_SPLIT = 'benchmark_split.csv'
BENCHMARK_TRAIN_CLASSES = range(7)


def prepare_digits(out_dir: str, size: int = 32, train_classes=(0, 1, 2, 3, 4)) -> dict:
    """Write the images and the benchmark split; returns the number of images
    per folder split. Idempotent."""
    import cv2
    import numpy as np
    try:
        from sklearn.datasets import load_digits
    except ImportError as err:
        raise ImportError('prepare_digits needs scikit-learn: pip install scikit-learn') from err
    digits = load_digits()
    counts = {'train': 0, 'test': 0}
    rows = ['path,label,split']
    for index, (image, label) in enumerate(zip(digits.images, digits.target)):
        split = 'train' if int(label) in train_classes else 'test'
        folder = osp.join(out_dir, split, str(int(label)))
        os.makedirs(folder, exist_ok=True)
        path = osp.join(folder, f'{index:04d}.png')
        counts[split] += 1
        benchmark_split = 'train' if int(label) in BENCHMARK_TRAIN_CLASSES else 'test'
        rows.append(f'{split}/{int(label)}/{index:04d}.png,{int(label)},{benchmark_split}')
        if osp.exists(path):
            continue
        # Pixel values are 0..16; scale to 0..255 and upsample smoothly.
        img = (image * (255.0 / 16.0)).astype(np.uint8)
        img = cv2.resize(img, (size, size), interpolation=cv2.INTER_LINEAR)
        cv2.imwrite(path, img)
    with open(osp.join(out_dir, BENCHMARK_SPLIT), 'w') as f:
        f.write('\n'.join(rows) + '\n')
    return counts
