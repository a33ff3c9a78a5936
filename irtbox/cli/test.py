"""Evaluate a retrieval model: extract test-set embeddings and compute the config's metrics.

Examples:
  python tools/test.py CONFIG CKPT
  python tools/test.py CONFIG CKPT --out results.npz     # embeddings, labels, ids, metrics
                                                         # (metrics also in results.json)
  python tools/test.py CONFIG CKPT --out results.json    # metrics only: name -> value
  python tools/test.py CONFIG CKPT --show-dir work_dirs/show   # result grids, index.html
                                                         # (open it in a browser), failures.csv
  python tools/test.py CONFIG                            # no checkpoint: the config's own weights
                                                         # (e.g. IRT_O, timm ImageNet weights)
  tools/dist_test.sh CONFIG CKPT 8
"""
import argparse
import json
import os
import os.path as osp

from irtbox.utils.config import DictAction


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Test an irtbox retrieval model.', epilog=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', nargs='?', default=None,
                        help='checkpoint file or URL (default: none, the weights the config builds)')
    parser.add_argument('--work-dir', help='where logs go (default: ./work_dirs/<config name>)')
    parser.add_argument('--out', help='a .npz file: write embeddings, labels, sample ids, query '
                        'flags and metrics there (metrics also to the same name with .json); '
                        'a .json file: write only the metrics (name -> value)')
    parser.add_argument('--show-dir', help='draw a sample of queries with their top-k there: '
                        'grids/*.png (green = correct, red = wrong, grey = junk), index.html '
                        '(a results browser; open it from the file system) and failures.csv')
    parser.add_argument('--show-num', type=int, default=50,
                        help='queries drawn with --show-dir (default 50; up to half of them '
                        'top-1 failures, the sample fixed by --show-seed)')
    parser.add_argument('--show-topk', type=int, default=8, help='results per query drawn')
    parser.add_argument('--show-seed', type=int, default=0, help='seed of the query sample')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, metavar='KEY=VALUE',
                        help='override config entries')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm'], default='none',
                        help='job launcher')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    if args.out and not args.out.endswith(('.npz', '.json')):
        parser.error(f'--out must name a .npz or .json file, got {args.out}')
    if args.show_num < 1 or args.show_topk < 1:
        parser.error('--show-num and --show-topk must be positive')
    return args


def write_outputs(path: str, metrics: dict, outputs: dict) -> None:
    """Writes the metrics to ``path`` with a .json suffix; for a .npz ``path`` also the arrays
    of ``outputs`` plus ``metrics/<name>`` to ``path``."""
    import numpy as np

    from irtbox.utils.fileio import atomic_write, atomic_write_text
    if path.endswith('.npz'):
        arrays = {k: np.asarray(v) for k, v in (outputs or {}).items()}
        arrays.update({f'metrics/{k}': np.asarray(v) for k, v in metrics.items()})
        atomic_write(path, lambda tmp: np.savez(tmp, **arrays))
    atomic_write_text(osp.splitext(path)[0] + '.json',
                      json.dumps({k: float(v) for k, v in metrics.items()}, indent=2))


def metric_outputs(runner) -> dict:
    """The arrays the test metrics kept (embeddings, labels, ...), by name: '<i>/' in front
    for test set i of a multi-dataset loop, '<tag>/' for a second metric of one test set
    whose names would collide (its ``tag``, else 'metric<j>')."""
    outputs = {}
    evaluators = getattr(runner.test_loop, 'evaluators', [runner.test_evaluator])
    for index, evaluator in enumerate(evaluators):
        # Several test sets (a multi-dataset loop): their arrays get a '<index>/' prefix.
        prefix = f'{index}/' if len(evaluators) > 1 else ''
        for j, metric in enumerate(evaluator.metrics):
            arrays = getattr(metric, 'last_outputs', None) or {}
            # Two metrics of one test set (e.g. with and without whitening) both keep
            # 'embeddings': the later one's go under its tag instead of replacing the first's.
            tag = ''
            if any(prefix + k in outputs for k in arrays):
                tag = (getattr(metric, 'tag', None) or f'metric{j}') + '/'
            outputs.update({prefix + tag + k: v for k, v in arrays.items()})
    return outputs


def evaluated_sets(runner) -> list:
    """(array-name prefix, dataset) of each test set, the prefixes of :func:`metric_outputs`."""
    loop = runner.test_loop
    loaders = getattr(loop, 'dataloaders', [loop.dataloader])
    return [(f'{i}/' if len(loaders) > 1 else '', loader.dataset)
            for i, loader in enumerate(loaders)]


def sample_paths(runner, outputs: dict) -> dict:
    """Per test set: each sample's image path relative to the data root (``img_path``), the
    root (``data_root``) and the class names (``class_names``) where the dataset has them."""
    from irtbox.visualization import relative_image_paths
    extra = {}
    for prefix, dataset in evaluated_sets(runner):
        if prefix + 'sample_idx' not in outputs or not hasattr(dataset, 'get_data_info'):
            continue
        paths = relative_image_paths(dataset, outputs[prefix + 'sample_idx'])
        extra.update({prefix + k: v for k, v in paths.items()})
        classes = dataset.metainfo.get('classes')
        if classes is not None:
            extra[prefix + 'class_names'] = [str(c) for c in classes]
    return extra


def show(runner, outputs: dict, metrics: dict, args) -> None:
    """Result grids, index.html and failures.csv of each test set (``--show-dir``; the
    test set's index as a subfolder when there are several)."""
    import numpy as np

    from irtbox.evaluation.functional import build_revisited_gnd
    from irtbox.visualization import show_results
    for prefix, dataset in evaluated_sets(runner):
        if prefix + 'img_path' not in outputs:
            runner.logger.warning(f'--show-dir: test set {prefix or 0} kept no embeddings or '
                                  'image paths; nothing drawn for it')
            continue
        root = str(outputs[prefix + 'data_root'])
        paths = [p if not root else osp.join(root, p) for p in outputs[prefix + 'img_path']]
        gnd = dataset.metainfo.get('gnd')  # revisited Oxford / Paris: Medium protocol
        labels = outputs.get(prefix + 'labels')
        out_dir = osp.join(args.show_dir, prefix.rstrip('/'))
        show_results(out_dir, outputs[prefix + 'embeddings'], paths,
                     is_query=outputs.get(prefix + 'is_query'),
                     labels=None if labels is None else np.asarray(labels),
                     gnd=None if gnd is None or labels is not None
                     else build_revisited_gnd(gnd, 'medium'),
                     class_names=outputs.get(prefix + 'class_names'),
                     metrics=metrics,
                     num=args.show_num, k=args.show_topk, seed=args.show_seed)
        runner.logger.info(f'results browser: {osp.join(out_dir, "index.html")}')


def main(argv=None):
    args = parse_args(argv)
    from mmengine.dist import get_rank

    from irtbox.apis import (build_runner, check_checkpoint, load_run_config,
                             without_pretrained_backbone)
    from irtbox.models.backbones import PretrainedWeightsUnavailable
    cfg = load_run_config(args.config, args.cfg_options, args.work_dir, args.launcher)
    if args.checkpoint is not None:
        try:
            cfg.load_from = check_checkpoint(args.checkpoint)
        except FileNotFoundError as error:
            raise SystemExit(str(error))
        # The checkpoint holds the backbone's weights: no download, and it works offline.
        cfg = without_pretrained_backbone(cfg)
    # Testing needs none of the training parts (and a config may leave them half-set).
    for key in ('train_dataloader', 'train_cfg', 'optim_wrapper', 'param_scheduler'):
        cfg[key] = None
    for key in ('test_dataloader', 'test_evaluator'):
        if cfg.get(key) is None:
            raise SystemExit(f'{args.config} has no {key}; tools/test.py needs one.')
    try:
        runner = build_runner(cfg)
    except PretrainedWeightsUnavailable as error:
        raise SystemExit(f'{args.config}: {error}') from error
    metrics = runner.test()
    if (args.out or args.show_dir) and get_rank() == 0:
        outputs = {}
        if args.show_dir or args.out.endswith('.npz'):
            outputs = metric_outputs(runner)
            outputs.update(sample_paths(runner, outputs))
        if args.out:
            write_outputs(args.out, metrics, outputs)
            runner.logger.info(f'results written to {args.out}')
        if args.show_dir:
            show(runner, outputs, metrics, args)
    return metrics
