"""Train/test overlap: which test images (every query and database image of a test config's test
sets) have a near copy among a training config's training images, by a model's embeddings.

A landmark benchmark whose landmarks are in the training set measures memory as much as
retrieval (GLDv2-clean shares about half of ROxford's and RParis's landmarks). The report says
which pairs, and writes the training classes to leave out as a file that a training config's
dataset reads (``exclude_classes``).
"""
import csv
import io
import json
import logging
import os
import os.path as osp
from collections import Counter
from typing import Dict, List, Optional, Tuple

import numpy as np
from mmengine.config import Config
from mmengine.logging import print_log
from mmengine.registry import DefaultScope

from irtbox.apis.extract import extract_features
from irtbox.apis.inference import init_model
from irtbox.apis.model_zoo import resolve_config
from irtbox.evaluation.functional.ranking import blockwise_topk
from irtbox.registry import DATASETS
from irtbox.utils.config import load_config
from irtbox.utils.errors import ArgumentError
from irtbox.utils.fileio import atomic_write_text
from irtbox.visualization.grid import save_image
from irtbox.visualization.overlap import draw_pair_grid, draw_score_histogram

__all__ = ['Images', 'config_images', 'check_overlap', 'OVERLAP_FILES']

#: What the report folder holds.
OVERLAP_FILES = dict(pairs='pairs.csv', summary='summary.json', histogram='histogram.png',
                     grid='top_pairs.png', exclude='exclude_classes.json')
PAIR_COLUMNS = ('test_set', 'test_image', 'test_class', 'train_image', 'train_class',
                'train_class_key', 'similarity')

# (set name, image path, class name or None, class key or None) per image.
Images = List[Tuple[str, str, Optional[str], object]]


def _dataset_images(dataset_cfg: dict, set_name: str, where: str) -> Images:
    """Every image of the dataset ``dataset_cfg`` builds, with its class where it has one."""
    with DefaultScope.overwrite_default_scope('irtbox'):
        dataset = DATASETS.build(dataset_cfg)
    classes = dataset.metainfo.get('classes')
    images = []
    for i in range(len(dataset)):
        info = dataset.get_data_info(i)
        label = info.get('gt_label')
        key = classes[label] if classes is not None and label is not None else None
        images.append((set_name, info['img_path'], None if key is None else str(key), key))
    if not images:
        raise ValueError(f'{where}: the dataset holds no images')
    return images


def config_images(cfg: Config, part: str) -> Images:
    """The images of ``cfg``'s ``part``: ``'train'``, its train dataloader's dataset, or
    ``'test'``, every dataset of its test dataloader(s) (named by their ``dataset_name``, else
    their type, and their position when there are several)."""
    name = osp.basename(getattr(cfg, 'filename', None) or 'config')
    loaders = cfg.get(f'{part}_dataloader')
    loaders = list(loaders) if isinstance(loaders, (list, tuple)) else [loaders]
    if not loaders or not all(isinstance(lo, dict) and isinstance(lo.get('dataset'), dict)
                              for lo in loaders):
        raise KeyError(f'{name}: no {part}_dataloader with a dataset to read the {part} images of')
    images = []
    for i, loader in enumerate(loaders):
        dataset = loader['dataset']
        set_name = str(dataset.get('dataset_name') or dataset.get('type'))
        set_name += f'.{i}' if len(loaders) > 1 and not dataset.get('dataset_name') else ''
        images += _dataset_images(dataset, set_name, f'{name}: {part}_dataloader')
    return images


def _training_rows(model, paths: List[str], dim: int, batch_size: int, num_workers: int,
                   progress: bool):
    """(``read(start, stop)``: the ``dim``-d embeddings of ``paths[start:stop]``, embedded when
    read, so that the training set is never held whole; an unreadable image is a zero row
    (similarity 0, below any sensible threshold) and its path is added to ``failed``)."""
    failed = []

    def read(start: int, stop: int) -> np.ndarray:
        chunk = paths[start:stop]
        got = extract_features(model, chunk, batch_size=batch_size, num_workers=num_workers,
                               progress=progress, identity=False)
        failed.extend(path for path, _ in got.failed)
        rows = dict(zip(got.ids, got.embeddings))
        return np.stack([rows.get(p, np.zeros(dim, np.float32)) for p in chunk])
    return read, failed


def check_overlap(train_config, test_config, checkpoint: Optional[str], out_dir: str,
                  threshold: float = 0.9, k: int = 5, top: int = 50, batch_size: int = 32,
                  num_workers: int = 2, block_size: int = 8192, device=None,
                  cfg_options: Optional[dict] = None, progress: bool = True) -> Dict:
    """Find the likely overlapping (test image, training image) pairs and write a report.

    The model is ``test_config``'s with ``checkpoint`` (the model whose test numbers are in
    question; None: the config's own weights). It embeds every image of the test config's
    test sets and every image of ``train_config``'s training set, both through the test
    config's test pipeline (whole images: a query's box is not cropped). Each test image's ``k``
    nearest training images are found by exact blockwise search (the training images are
    embedded and searched ``block_size`` at a time: memory test images x ``block_size``,
    whatever the training set's size), and the pairs of cosine similarity >= ``threshold``
    are the likely overlaps.

    Writes into ``out_dir`` (``OVERLAP_FILES``): ``pairs.csv`` (``PAIR_COLUMNS``, most similar
    first), ``summary.json`` (counts, pairs per test set, test class and training class,
    the histogram), ``histogram.png`` (each test image's best similarity), ``top_pairs.png``
    (the ``top`` most similar pairs; none without pairs) and ``exclude_classes.json`` (the
    training class keys of the pairs, a list for a dataset's ``exclude_classes``).

    Returns:
        The summary (what ``summary.json`` holds).
    """
    if not -1.0 <= threshold <= 1.0:
        raise ArgumentError(f'threshold {threshold}: expected a cosine similarity in [-1, 1]',
                            'threshold', threshold)
    for value, argument in ((k, 'k'), (top, 'top'), (block_size, 'block_size')):
        if value < 1:
            raise ArgumentError(f'{argument} {value}: expected a positive number', argument,
                                value)
    train_cfg = load_config(resolve_config(train_config), cfg_options)
    test_cfg = load_config(resolve_config(test_config), cfg_options)
    train, test = config_images(train_cfg, 'train'), config_images(test_cfg, 'test')
    model = init_model(test_cfg, checkpoint, device=device)
    print_log(f'overlap: {len(test)} test images against {len(train)} training images',
              logger='current')
    embedded = extract_features(model, [t[1] for t in test], batch_size=batch_size,
                                num_workers=num_workers, progress=progress, identity=False)
    if not embedded.ids:
        raise ValueError(f'{test_cfg.filename}: none of the {len(test)} test images could be '
                         'read')
    row_of = {path: i for i, path in enumerate(embedded.ids)}
    test = [t for t in test if t[1] in row_of]  # the unreadable ones are in the summary
    queries = embedded.embeddings[[row_of[t[1]] for t in test]]
    read, failed = _training_rows(model, [t[1] for t in train], queries.shape[1], batch_size,
                                  num_workers, progress)
    # range(n): blockwise_topk takes len(rows) and reads every block through ``read``.
    scores, found = blockwise_topk(queries, range(len(train)), min(k, len(train)),
                                   block_rows=block_size, read=read)
    pairs = sorted(((float(s), q, int(j)) for q, (row, cols) in enumerate(zip(scores, found))
                    for s, j in zip(row, cols) if s >= threshold), key=lambda p: (-p[0], p[1:]))
    summary = _summary(test, train, pairs, scores[:, 0], threshold, k, test_cfg, train_cfg,
                       checkpoint, [p for p, _ in embedded.failed], failed)
    _write_report(out_dir, test, train, pairs, scores[:, 0], summary, top)
    return summary


def _summary(test: Images, train: Images, pairs, best: np.ndarray, threshold: float, k: int,
             test_cfg, train_cfg, checkpoint, test_failed, train_failed) -> Dict:
    counts, edges = np.histogram(np.clip(best, -1, 1), bins=50, range=(-1.0, 1.0))
    excluded = sorted({train[j][3] for _, _, j in pairs if train[j][3] is not None},
                      key=lambda key: (isinstance(key, str), key))
    return dict(
        test_config=test_cfg.filename, train_config=train_cfg.filename, checkpoint=checkpoint,
        threshold=threshold, k=k, test_images=len(test), train_images=len(train),
        pairs=len(pairs), test_images_overlapping=len({q for _, q, _ in pairs}),
        train_images_overlapping=len({j for _, _, j in pairs}),
        train_classes_overlapping=len(excluded),
        pairs_per_test_set=dict(Counter(test[q][0] for _, q, _ in pairs)),
        pairs_per_test_class=dict(Counter(test[q][2] for _, q, _ in pairs
                                          if test[q][2] is not None)),
        pairs_per_train_class=dict(Counter(train[j][2] for _, _, j in pairs
                                           if train[j][2] is not None)),
        exclude_classes=excluded,
        best_similarity=dict(min=float(best.min()), median=float(np.median(best)),
                             max=float(best.max()), histogram_edges=edges.tolist(),
                             histogram_counts=counts.tolist()),
        unreadable=dict(test=test_failed, train=train_failed))


def _write_report(out_dir: str, test: Images, train: Images, pairs, best: np.ndarray,
                  summary: Dict, top: int) -> None:
    os.makedirs(out_dir, exist_ok=True)
    path = {name: osp.join(out_dir, file) for name, file in OVERLAP_FILES.items()}
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(PAIR_COLUMNS)
    for score, q, j in pairs:
        writer.writerow([test[q][0], test[q][1], test[q][2] or '', train[j][1],
                         train[j][2] or '', json.dumps(train[j][3]), f'{score:.6f}'])
    atomic_write_text(path['pairs'], text.getvalue())
    atomic_write_text(path['summary'], json.dumps(summary, indent=1))
    atomic_write_text(path['exclude'], json.dumps(summary['exclude_classes']))
    draw_score_histogram(best, summary['threshold'], path['histogram'],
                         title=f'{len(best)} test images')
    grid = draw_pair_grid([(test[q][1], train[j][1], score,
                            f'{osp.basename(test[q][1])} ~ train class {train[j][2]}')
                           for score, q, j in pairs[:top]])
    if grid is not None:
        save_image(grid, path['grid'])
    elif osp.exists(path['grid']):  # an earlier run's pairs would be taken for this one's
        os.remove(path['grid'])
    print_log(f'overlap: {len(pairs)} pairs of similarity >= {summary["threshold"]:g} '
              f'({summary["test_images_overlapping"]} test images, '
              f'{summary["train_classes_overlapping"]} training classes); report in {out_dir}',
              logger='current', level=logging.WARNING if pairs else logging.INFO)
