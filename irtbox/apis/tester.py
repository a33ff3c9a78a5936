"""Testing a model from its config, and what a test leaves: one
:class:`~irtbox.structures.EmbeddingSet` per test set (and per extra metric of one). Set names:
``''`` for the only test set of a run, ``'0'``, ``'1'``, ... for those of a multi-dataset loop; a
second metric of one test set that keeps embeddings too (e.g. with and without whitening) gets
``'<set>/<tag>'`` (``'<tag>'`` for a single test set), its ``tag`` else ``'metric<j>'``."""
import dataclasses
import json
import os
import os.path as osp
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from mmengine.dist import get_rank

from irtbox.engine.hooks.utils import bare_model
from irtbox.evaluation.functional import build_revisited_gnd
from irtbox.models.backbones import PretrainedWeightsUnavailable
from irtbox.models.input_spec import InputSpec, config_test_pipeline, resolve_input_spec
from irtbox.structures.embeddings_file import EMBEDDINGS_FORMAT, EmbeddingSet, save_embeddings
from irtbox.utils.errors import IrtboxError
from irtbox.utils.fileio import atomic_write, atomic_write_text, write_problem
from irtbox.visualization import show_results

from .identity import model_identity
from .inference import without_pretrained_backbone
from .run_setup import build_runner, check_checkpoint, load_run_config

__all__ = ['EvaluationSetupError', 'run_test', 'result_sets', 'write_results',
           'show_result_sets', 'check_output_path', 'dataset_image_ids', 'runner_model_identity',
           'runner_input_spec']


class EvaluationSetupError(IrtboxError, RuntimeError):
    """A test that cannot start (a missing checkpoint or test set, weights that cannot be
    fetched, an output that cannot be written); raised before any evaluation."""


def check_output_path(path: str, argument: str, folder: bool = False) -> None:
    """Raise :class:`EvaluationSetupError` naming ``argument`` unless a file (with ``folder``,
    a folder) can be written at ``path`` (:func:`~irtbox.utils.fileio.write_problem`)."""
    problem = write_problem(path, folder)
    if problem:
        raise EvaluationSetupError(f'{argument} {problem}', argument=argument)


def _launch_rank() -> int:
    """This process's rank as the launcher set it (before the process group exists)."""
    for key in ('RANK', 'SLURM_PROCID'):
        if os.environ.get(key, '').isdigit():
            return int(os.environ[key])
    return 0


def run_test(config: str, checkpoint: Optional[str] = None, cfg_options: Optional[dict] = None,
             work_dir: Optional[str] = None, launcher: str = 'none', out: Optional[str] = None,
             show_dir: Optional[str] = None, show_num: int = 50, show_topk: int = 8,
             show_seed: int = 0, hooks: Sequence = ()) -> Dict[str, float]:
    """Test the model of ``config`` (with ``checkpoint``'s weights, else those the config builds) on
    its test set(s) and return the metrics. ``out`` (:func:`write_results`) and ``show_dir``
    (:func:`show_result_sets`) are written by rank 0 and checked to be writable before the test
    runs. ``hooks``: more hooks for the runner (e.g. a command's terminal header)."""
    if out is not None and not out.endswith(('.npz', '.json')):
        raise EvaluationSetupError(f'out must name a .npz or .json file, got {out}',
                                   argument='out')
    if _launch_rank() == 0:
        if out:
            check_output_path(out, 'out')
        if show_dir:
            check_output_path(show_dir, 'show_dir', folder=True)
    cfg = load_run_config(config, cfg_options, work_dir, launcher)
    if checkpoint is not None:
        try:
            cfg.load_from = check_checkpoint(checkpoint)
        except FileNotFoundError as error:
            raise EvaluationSetupError(str(error)) from error
        # The checkpoint holds the backbone's weights: no download, and it works offline.
        cfg = without_pretrained_backbone(cfg)
    # Testing needs none of the training parts (and a config may leave them half-set).
    for key in ('train_dataloader', 'train_cfg', 'optim_wrapper', 'param_scheduler'):
        cfg[key] = None
    for key in ('test_dataloader', 'test_evaluator'):
        if cfg.get(key) is None:
            raise EvaluationSetupError(f'{config} has no {key}; testing needs one.')
    try:
        runner = build_runner(cfg)
    except PretrainedWeightsUnavailable as error:
        raise EvaluationSetupError(f'{config}: {error}') from error
    for hook in hooks:
        runner.register_hook(hook)
    metrics = runner.test()
    if (out or show_dir) and get_rank() == 0:
        sets = {}
        if show_dir or out.endswith('.npz'):
            sets = result_sets(runner, metrics, identity=bool(out and out.endswith('.npz')))
        if out:
            write_results(out, sets, metrics)
            runner.logger.info(f'results written to {out}')
        if show_dir:
            for page in show_result_sets(runner, sets, show_dir, num=show_num, k=show_topk,
                                         seed=show_seed):
                runner.logger.info(f'results browser: {page}')
    return metrics


def _test_sets(runner) -> List[Tuple[str, object, object]]:
    """(set name, dataset, evaluator) of each test set of a tested runner."""
    loop = runner.test_loop
    loaders = loop.dataloaders if hasattr(loop, 'dataloaders') else [loop.dataloader]
    evaluators = loop.evaluators if hasattr(loop, 'evaluators') else [runner.test_evaluator]
    if len(loaders) != len(evaluators):
        raise ValueError(f'the test loop has {len(loaders)} dataloaders and {len(evaluators)} '
                         'evaluators; expected one evaluator per test set')
    return [(str(i) if len(loaders) > 1 else '', loader.dataset, evaluator)
            for i, (loader, evaluator) in enumerate(zip(loaders, evaluators))]


def _metric_outputs(name: str, evaluator) -> Iterator[Tuple[str, dict]]:
    """(set name, arrays) of each metric of one test set that kept embeddings
    (``metric.last_outputs``): the first under ``name``, the others under ``name/<tag>``."""
    taken = set()
    for j, metric in enumerate(evaluator.metrics):
        arrays = getattr(metric, 'last_outputs', None) or {}
        if 'embeddings' not in arrays:
            continue
        if name not in taken:
            set_name = name
        else:
            tag = getattr(metric, 'tag', None) or f'metric{j}'
            set_name = f'{name}/{tag}' if name else tag
            if set_name in taken:
                set_name = f'{set_name}{j}'
        taken.add(set_name)
        yield set_name, arrays


def dataset_image_ids(dataset, sample_idx: Sequence[int]) -> Tuple[List[str], str]:
    """(image paths of the samples ``sample_idx`` of an MMEngine ``BaseDataset``, its absolute data
    root or ``''``): the paths relative to the root where under it, else absolute."""
    root = osp.abspath(dataset.data_root) if getattr(dataset, 'data_root', '') else ''
    ids = []
    for i in sample_idx:
        path = osp.abspath(dataset.get_data_info(int(i))['img_path'])
        rel = osp.relpath(path, root) if root else path
        ids.append(path if rel.startswith('..') else rel)
    return ids, root


def runner_model_identity(runner) -> Optional[dict]:
    """The identity of a runner's model, with its config file and checkpoint; None, with a
    warning, when the model has no input spec."""
    model = bare_model(runner)
    if runner_input_spec(runner) is None:
        runner.logger.warning('the model has no input spec, so no identity; the results file '
                              'has none')
        return None
    return model_identity(model, config=runner.cfg.filename,
                          checkpoint=runner.cfg.get('load_from'))


def runner_input_spec(runner) -> Optional[InputSpec]:
    """A runner's model's :class:`~irtbox.models.input_spec.InputSpec`, resolved once and kept
    as ``model.input_spec``; None, with a warning, when there is no working test pipeline."""
    model = bare_model(runner)
    if getattr(model, 'input_spec', None) is None and config_test_pipeline(runner.cfg):
        try:
            model.input_spec = resolve_input_spec(model, runner.cfg)
        except ValueError as error:
            runner.logger.warning(f'the model has no input spec ({error})')
    return getattr(model, 'input_spec', None)


def result_sets(runner, metrics: Optional[Dict[str, float]] = None,
                identity: bool = True) -> Dict[str, EmbeddingSet]:
    """The results of a tested runner by set name: each test metric's kept arrays
    (``last_outputs``) as an :class:`EmbeddingSet` (``ids``: the image paths relative to
    ``data_root``); the arrays other than embeddings, labels and query flags (``sample_idx``,
    per-query APs) go to ``extra``."""
    metrics = {k: float(v) for k, v in (metrics or {}).items()}
    model_id = runner_model_identity(runner) if identity else None
    sets = {}
    for name, dataset, evaluator in _test_sets(runner):
        for set_name, arrays in _metric_outputs(name, evaluator):
            ids, root = None, ''
            if 'sample_idx' in arrays and hasattr(dataset, 'get_data_info'):
                ids, root = dataset_image_ids(dataset, arrays['sample_idx'])
            classes = getattr(dataset, 'metainfo', {}).get('classes')
            labels, is_query = arrays.get('labels'), arrays.get('is_query')
            sets[set_name] = EmbeddingSet(
                embeddings=np.asarray(arrays['embeddings'], dtype=np.float32), ids=ids,
                data_root=root, labels=None if labels is None else np.asarray(labels),
                is_query=None if is_query is None else np.asarray(is_query, dtype=bool),
                class_names=None if classes is None else [str(c) for c in classes],
                metrics=dict(metrics), identity=model_id,
                extra={k: np.asarray(v) for k, v in arrays.items()
                       if k not in ('embeddings', 'labels', 'is_query')})
    return sets


def write_results(path: str, sets: Dict[str, EmbeddingSet], metrics: Dict[str, float]) -> None:
    """A ``.npz`` ``path``: the embeddings file of ``sets`` (with no set, the metrics alone),
    and the metrics to the same name with ``.json``; a ``.json`` ``path``: only the metrics."""
    metrics = {k: float(v) for k, v in metrics.items()}
    if path.endswith('.npz'):
        if sets:
            save_embeddings(path, {name: dataclasses.replace(data, metrics=dict(metrics))
                                   for name, data in sets.items()})
        else:  # no metric kept embeddings: a file of metrics only, still readable
            arrays = {f'metrics/{k}': np.asarray(v) for k, v in metrics.items()}
            # The temporary file ends in .npz: np.savez adds no second one.
            atomic_write(path, lambda tmp: np.savez(tmp, format=np.array(EMBEDDINGS_FORMAT),
                                                    **arrays))
    elif not path.endswith('.json'):
        raise ValueError(f'write_results: {path} must end with .npz or .json')
    atomic_write_text(osp.splitext(path)[0] + '.json', json.dumps(metrics, indent=2))


def show_result_sets(runner, sets: Dict[str, EmbeddingSet], out_dir: str, num: int = 50,
                     k: int = 8, seed: int = 0) -> List[str]:
    """Result grids, ``index.html`` and ``failures.csv`` of each test set in
    ``out_dir/<set name>``; a set without labels is drawn against its dataset's revisited
    ground truth (Medium). Returns the ``index.html`` paths written."""
    pages = []
    for name, dataset, _ in _test_sets(runner):
        data = sets.get(name)
        if data is None or data.ids is None:
            runner.logger.warning(f'test set {name or 0} kept no embeddings or image paths; no '
                                  'result pictures drawn for it')
            continue
        gnd = getattr(dataset, 'metainfo', {}).get('gnd')
        folder = osp.join(out_dir, name)
        show_results(folder, data.embeddings, data.paths(), is_query=data.is_query,
                     labels=data.labels,
                     gnd=None if gnd is None or data.labels is not None
                     else build_revisited_gnd(gnd, 'medium'),
                     class_names=data.class_names, metrics=data.metrics, num=num, k=k,
                     seed=seed)
        pages.append(osp.join(folder, 'index.html'))
    return pages
