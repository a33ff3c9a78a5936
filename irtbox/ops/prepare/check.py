"""Is a prepared tree right? :func:`check_dataset` builds each split with the class a config
builds, then checks that every file the annotation names exists, that images decode (a seeded
sample, or all), and that the counts per split are the published ones (the dataset
classes' specs; every run checks the counts only: :func:`irtbox.datasets.spec.count_mismatch`)."""
import glob
import os
import os.path as osp
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Optional

from irtbox.datasets.spec import (COUNT_KEYS, CountView, DatasetSpec, count_differences,
                                  dataset_counts)
from irtbox.registry import DATASETS
from irtbox.utils.image import decode_image

__all__ = ['check_dataset', 'format_report']


def _problem(report: dict, severity: str, what: str, where: str, fix: str) -> None:
    report['problems'].append(dict(severity=severity, what=what, where=where, fix=fix))


def _build(view: CountView, root: str, lazy: bool = False):
    # serialize_data=False: MMEngine's serialisation runs gc.collect() on every build.
    return DATASETS.build(dict(view.dataset, data_root=root, serialize_data=False,
                               lazy_init=lazy))


def _missing_annotation_hint(view: CountView, root: str) -> str:
    """Where the split's annotation file is when it is not where it is read from, because the
    tree has an extra folder level."""
    try:
        ann_file = _build(view, root, lazy=True).ann_file
    except Exception:  # the lazy build failed too: the error itself says enough
        return ''
    name = osp.basename(ann_file)
    found = [] if osp.isfile(ann_file) else sorted(
        glob.glob(osp.join(glob.escape(root), '*', name))
        + glob.glob(osp.join(glob.escape(root), '*', '*', name)))
    if not found:
        return ''
    folder = osp.dirname(osp.relpath(found[0], root))
    return (f'; {name} is in {folder}/: the tree has an extra folder level, move the '
            f'content of {osp.join(root, folder)} up into {root}')


def _decodes(path: str) -> Optional[str]:
    """None when the image decodes as the pipelines decode it
    (:func:`~irtbox.utils.image.decode_image`), else why not."""
    try:
        with open(path, 'rb') as f:
            decode_image(f.read())
    except Exception as err:  # noqa: BLE001 (OSError, the decoder's ValueError, the cap's)
        return f'{type(err).__name__}: {err}'
    return None


def check_dataset(info: DatasetSpec, root: str, full: bool = False, sample: int = 1000,
                  seed: int = 0, workers: Optional[int] = None,
                  expected: Optional[Dict[str, Dict[str, int]]] = None,
                  prepare_hint: Optional[str] = None) -> dict:
    """Check the tree of ``info`` under ``root``; returns the report (a JSON-ready dict).

    Args:
        full: Decode every image instead of a sample of ``sample`` per split.
        expected: Counts per split replacing the published ones (a subset made on purpose):
            ``{'train': {'images': 32, 'classes': 8}}``.
        prepare_hint: How to prepare the tree, in the caller's words (the command line gives
            its command); default: :func:`prepare_dataset`.

    Report: ``dataset``, ``root``, ``ok`` (no error), ``splits`` (per split ``counts``,
    ``expected``, ``missing``, ``decoded``, ``undecodable``) and ``problems``, each with
    ``severity`` (``error``: the numbers would be wrong; ``warning``; ``info``), ``what``,
    ``where`` and ``fix``.
    """
    report = dict(dataset=info.name, root=root, ok=True, splits={}, problems=[])
    prepare_fix = (f'{prepare_hint} (see docs/datasets.md)' if prepare_hint else
                   f'prepare it (prepare_dataset of {info.name}, root {root}; see docs/datasets.md)')
    if not osp.isdir(root):
        _problem(report, 'error', 'the dataset folder does not exist', root, prepare_fix)
        report['ok'] = False
        return report
    rng = random.Random(seed)
    for view in info.views:
        split = report['splits'].setdefault(view.name, {})
        try:
            dataset = _build(view, root)
        except Exception as err:  # any error of the annotation is the finding itself
            _problem(report, 'error', f'the {view.name} split cannot be read: {err}'
                     f'{_missing_annotation_hint(view, root)}', root, prepare_fix)
            continue
        counts = dataset_counts(dataset)
        source = expected[view.name] if expected and view.name in expected else vars(view)
        want = {k: source.get(k) for k in COUNT_KEYS}
        split.update(counts=counts, expected={k: v for k, v in want.items() if v is not None})
        wrong = count_differences(counts, want)
        if wrong:
            _problem(report, 'error' if view.exact else 'info',
                     f'{view.name}: {", ".join(wrong)}'
                     + ('' if view.exact else ' (copies of this URL list differ)'),
                     getattr(dataset, 'ann_file', root),
                     'a partial or wrong annotation or tree: ' + prepare_fix
                     if view.exact else 'none needed if this is your copy')
        paths = [dataset.get_data_info(i)['img_path'] for i in range(len(dataset))]
        missing = [p for p in paths if not osp.isfile(p)]
        split['missing'] = len(missing)
        if missing:
            _problem(report, 'error', f'{view.name}: {len(missing):,} of {len(paths):,} '
                     f'listed images are missing, e.g. {", ".join(missing[:3])}',
                     osp.dirname(missing[0]), prepare_fix)
        present = sorted(set(paths) - set(missing))
        chosen = present if full or len(present) <= sample else rng.sample(present, sample)
        with ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool:
            results = list(pool.map(_decodes, chosen))
        bad = [(p, why) for p, why in zip(chosen, results) if why]
        split.update(decoded=len(chosen) - len(bad), undecodable=[p for p, _ in bad])
        if bad:
            _problem(report, 'error', f'{view.name}: {len(bad)} of {len(chosen)} decoded '
                     f'images are damaged, e.g. {bad[0][0]} ({bad[0][1]})', bad[0][0],
                     'download and unpack again: remove the root, then ' + prepare_fix)
    report['ok'] = not any(p['severity'] == 'error' for p in report['problems'])
    return report


def format_report(report: dict) -> str:
    """The report for a person: one line per split, then what is wrong and the fix."""
    lines = [f"{report['dataset']} under {report['root']}: "
             f"{'OK' if report['ok'] else 'PROBLEMS FOUND'}"]
    for name, split in report['splits'].items():
        if 'counts' not in split:
            continue
        counts = ', '.join(f'{v:,} {k}' for k, v in split['counts'].items())
        lines.append(f'  {name}: {counts}; {split.get("missing", 0):,} missing; '
                     f'{split.get("decoded", 0):,} decoded, '
                     f'{len(split.get("undecodable", [])):,} damaged')
    for p in report['problems']:
        lines.append(f"  {p['severity'].upper()}: {p['what']}\n    where: {p['where']}\n"
                     f"    fix: {p['fix']}")
    return '\n'.join(lines)
