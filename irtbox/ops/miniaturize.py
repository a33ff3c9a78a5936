"""A config in miniature: the same model, hooks, losses and loops, on tiny data at a small
input size, with every interval short enough that each hook fires within a few iterations.
Each step :func:`miniaturize` takes is a function of its own, so that a reader sees exactly
what a rehearsal changes."""
import copy
import os.path as osp
from typing import Dict, Iterator, List, Optional, Tuple

import torch
from mmengine.config import Config, ConfigDict
from mmengine.registry import DefaultScope

from irtbox.apis.setup_env import register_all_modules
from irtbox.datasets.samplers import get_dataset_labels
from irtbox.datasets.transforms.group_resize import DEFAULT_GROUP_SIZES
from irtbox.models.backbones import PretrainedWeightsUnavailable, offline_hub, pretrained_init_cfg
from irtbox.registry import DATASETS, MODELS, type_name
from irtbox.utils.errors import ArgumentError
from irtbox.utils.fileio import atomic_write
from .miniature import miniature_kinds, point_at_miniature, write_miniature

__all__ = ['DEFAULT_INPUT_SIZE', 'QUICK_INPUT_SIZE', 'miniaturize', 'point_datasets',
           'config_dicts', 'scale_input_size', 'shallow_backbone', 'stand_in_weights',
           'shorten_schedule', 'shrink_loaders', 'shrink_projections', 'fit_classifiers',
           'force_autocast',
           'loader_cfgs', 'config_data_roots', 'timm_kwargs', 'timm_model']

DEFAULT_INPUT_SIZE = 64
QUICK_INPUT_SIZE = 32  # a quick rehearsal's input side
_STAND_IN_SEED = 20211124  # any fixed seed: the stand-in's values are known, not the run's init

# Pixel-size arguments of the transforms the shipped configs use.
_SIZE_KEYS = {'Resize': 'scale', 'CenterCrop': 'crop_size', 'RandomCrop': 'crop_size',
              'RandomResizedCrop': 'scale', 'GroupResize': 'sizes'}


def loader_cfgs(cfg: Config) -> Iterator[Tuple[str, dict]]:
    """(where, loader dict) for every dataloader of ``cfg``: the ``*_dataloader`` entries and
    each custom hook's ``dataloader``, each dict once (a hook's loader may be the very dict
    of a top-level entry, which must not be scaled twice)."""
    found = []
    for key in list(cfg.keys()):
        if key.endswith('_dataloader') and cfg[key]:
            loaders = cfg[key] if isinstance(cfg[key], (list, tuple)) else [cfg[key]]
            found += [(key if len(loaders) == 1 else f'{key}[{i}]', loader)
                      for i, loader in enumerate(loaders)]
    found += [(f'custom_hooks[{i}] ({hook.get("type")}).dataloader', hook['dataloader'])
              for i, hook in enumerate(cfg.get('custom_hooks') or [])
              if isinstance(hook.get('dataloader'), dict)]
    seen = set()
    for where, loader in found:
        if id(loader) not in seen:
            seen.add(id(loader))
            yield where, loader


def config_dicts(node) -> Iterator[dict]:
    """Every dict inside ``node`` (dicts and lists, depth first), ``node`` included."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from config_dicts(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            yield from config_dicts(value)


def point_datasets(cfg: Config, data_dir: str, data_root: Optional[str] = None,
                   subset: Optional[int] = None, image_size: int = 32) -> List[str]:
    """Point every dataset of ``cfg``'s loaders at miniature data written under
    ``data_dir/<kind>``, or, with ``data_root``, at the user's data (a config's
    ``/datasets/sop`` is looked up as ``<data_root>/sop``). ``subset`` keeps the first
    ``subset`` items of each dataset. Returns one line per dataset."""
    done, written = [], {}
    for where, loader in loader_cfgs(cfg):
        dataset = loader.get('dataset')
        if not isinstance(dataset, dict):
            continue  # e.g. TupleMiningHook: the training set, seen through the loader's args
        if data_root is not None:
            _use_own_data(dataset, data_root)
            done.append(f'{where}: {data_root}')
        else:
            kinds = miniature_kinds(dataset)
            if not kinds:
                raise ArgumentError(
                    f'{where}: no miniature stands for dataset type {dataset.get("type")!r}; '
                    'rehearse it on your own data (data_root).', 'data_root')
            for kind in kinds:
                if kind not in written:
                    written[kind] = write_miniature(kind, osp.join(data_dir, kind),
                                                    size=image_size)
                dataset = point_at_miniature(dataset, written[kind], kind)
            loader['dataset'] = dataset
            done.append(f'{where}: miniature {", ".join(kinds)}')
        if subset:
            loader['dataset']['indices'] = int(subset)
    return done


_ROOT_KEYS = ('data_root', 'distractors_root')


def config_data_roots(cfg: Config) -> List[str]:
    """The data folders ``cfg``'s loaders read (``data_root``, ``distractors_root``), each
    once, in the order found."""
    roots = []
    for _, loader in loader_cfgs(cfg):
        for node in config_dicts(loader.get('dataset')):
            for key in _ROOT_KEYS:
                value = node.get(key)
                if isinstance(value, str) and value not in roots:
                    roots.append(value)
    return roots


def _use_own_data(dataset: dict, data_root: str) -> None:
    """Re-point every data folder of ``dataset`` to the folder of the same name under
    ``data_root``; one that is not there is refused: the rehearsal would read nothing."""
    for node in config_dicts(dataset):
        for key in _ROOT_KEYS:
            value = node.get(key)
            if isinstance(value, str):
                mine = osp.join(data_root, osp.basename(osp.normpath(value)))
                if not osp.isdir(mine):
                    raise ArgumentError(
                        f'data_root {data_root}: the config\'s {key} {value} is looked up '
                        f'as {mine}, which is not a folder', 'data_root', data_root)
                node[key] = mine


def timm_kwargs(backbone: dict) -> dict:
    """The arguments a ``TimmBackbone`` config passes on to ``timm.create_model``."""
    own = ('type', 'model_name', 'pretrained', 'checkpoint', 'out_indices', 'norm',
           'pos_embed', 'init_cfg')
    return {k: v for k, v in backbone.items() if k not in own}


def timm_model(backbone: dict, device: str = 'meta'):
    """The timm model a ``TimmBackbone`` config builds, without pretrained weights; on the
    meta device by default (no memory, no values: its structure only)."""
    import timm
    with torch.device(device):
        return timm.create_model(backbone['model_name'], pretrained=False, num_classes=0,
                                 **timm_kwargs(backbone))


def _backbone_input(backbone: dict) -> Tuple[int, int, bool]:
    """(input side, patch size (1 for CNNs), whether the input size is fixed) of a
    ``TimmBackbone`` config, read off its timm model on the meta device."""
    kwargs = timm_kwargs(backbone)
    model = timm_model(backbone)
    side = int(kwargs.get('img_size') or model.pretrained_cfg.get('input_size', (3, 224))[-1])
    embed = getattr(model, 'patch_embed', None)
    patch = int(embed.patch_size[0]) if embed is not None and hasattr(embed, 'patch_size') else 1
    fixed = (embed is not None and backbone.get('pos_embed', 'timm') == 'timm'
             and not kwargs.get('dynamic_img_size', False))
    return side, patch, fixed


def _scaled(value, factor: float):
    if isinstance(value, (int, float)):
        return max(8, int(round(value * factor)))
    return type(value)(_scaled(v, factor) for v in value) if isinstance(value, (list, tuple)) \
        else value


def scale_input_size(cfg: Config, input_size: int) -> str:
    """Scale every pixel size of the loaders' pipelines so that the model's input side
    becomes ``input_size`` (rounded to a multiple of the patch size); a ViT with a fixed
    input size is built for it (``img_size``). Returns a line saying what changed."""
    backbone = cfg.model.get('backbone') or {}
    if type_name(backbone) != 'TimmBackbone':
        raise ValueError(f'scale_input_size: only TimmBackbone models, not '
                         f'{backbone.get("type")!r}; keep the sizes (input size 0)')
    side, patch, fixed = _backbone_input(backbone)
    target = max(patch, int(round(input_size / patch)) * patch)
    factor = target / side
    scaled = set()
    for _, loader in loader_cfgs(cfg):
        for node in config_dicts(loader):
            key = _SIZE_KEYS.get(type_name(node))
            if key is None or id(node) in scaled:  # a pipeline two loaders share: once
                continue
            scaled.add(id(node))
            if key == 'sizes' and key not in node:
                node[key] = [list(s) for s in DEFAULT_GROUP_SIZES]
            if node.get(key) is not None:
                node[key] = _scaled(node[key], factor)
    if fixed:
        backbone['img_size'] = target
    return (f'input side {side} -> {target} (pipeline sizes x {factor:.3f}'
            f'{", backbone img_size " + str(target) if fixed else ""})')


def shallow_backbone(cfg: Config) -> Optional[str]:
    """A transformer backbone with the fewest blocks its ``out_indices`` need (at least two):
    the same code on every path at a fraction of the time and checkpoint size (a quick
    rehearsal). Returns a line saying what changed, None when nothing did (CNNs, PiT, whose
    depth is per stage, and backbones already that shallow)."""
    backbone = cfg.model.get('backbone') or {}
    if type_name(backbone) != 'TimmBackbone':
        return None
    from timm.models.vision_transformer import VisionTransformer
    model = timm_model(backbone)
    if not isinstance(model, VisionTransformer):  # its subclasses too: DeiT, hybrids
        return None
    blocks = model.blocks
    indices = backbone.get('out_indices', -1)
    indices = [indices] if isinstance(indices, int) else list(indices)
    depth = max([2] + [-i if i < 0 else i + 1 for i in indices])
    if depth >= len(blocks):
        return None
    backbone['depth'] = depth
    return f'backbone depth {len(blocks)} -> {depth} blocks (quick)'


def stand_in_weights(cfg: Config, weights_dir: str, use_cache: bool = True) -> str:
    """Give the backbone of ``cfg`` weights that are here: timm's pretrained ones when cached
    (and ``use_cache``), else a checkpoint of known values written to ``weights_dir`` (no
    network needed, and a start training can be checked against). Returns a line."""
    backbone = cfg.model.get('backbone') or {}
    if type_name(backbone) != 'TimmBackbone':
        return 'backbone weights: as configured (not a TimmBackbone)'
    init = pretrained_init_cfg(backbone.get('init_cfg'))
    wanted = backbone.get('pretrained') or backbone.get('checkpoint') or init
    if not wanted:
        return 'backbone weights: random initialisation, as configured'
    if backbone.get('pretrained') and use_cache:
        try:
            with offline_hub():
                MODELS.build(copy.deepcopy(backbone))
            return f"backbone weights: timm's pretrained {backbone['model_name']}, from the cache"
        except PretrainedWeightsUnavailable:
            pass  # not cached: a stand-in below
    elif backbone.get('checkpoint') and osp.exists(str(backbone['checkpoint'])):
        return f'backbone weights: {backbone["checkpoint"]}, as configured'
    torch.manual_seed(_STAND_IN_SEED)
    model = timm_model(backbone, 'cpu')
    path = osp.join(weights_dir, f'stand_in_{backbone["model_name"]}.pth')
    atomic_write(path, lambda tmp: torch.save(model.state_dict(), tmp))
    backbone.update(pretrained=False, checkpoint=path, init_cfg=None)
    return f'backbone weights: a stand-in of known values for the unavailable ones ({path})'


def shorten_schedule(cfg: Config, units: int) -> Dict[str, str]:
    """Two phases of ``units`` iterations (or of one epoch each), validation and a
    checkpoint at the end of each, loggers and hook intervals 1. Returns the
    config options of the first phase (the config itself holds both phases)."""
    train_cfg = cfg.get('train_cfg') or {}
    by_epoch = 'max_epochs' in train_cfg or 'Epoch' in str(train_cfg.get('type', ''))
    if by_epoch:
        train_cfg.update(max_epochs=2, val_interval=1, val_begin=1)
        first = {'train_cfg.max_epochs': '1'}
    else:
        train_cfg.update(max_iters=2 * units, val_interval=units, val_begin=1)
        first = {'train_cfg.max_iters': str(units)}
    hooks = cfg.setdefault('default_hooks', ConfigDict())
    if hooks.get('checkpoint'):
        hooks.checkpoint.update(interval=1 if by_epoch else units, by_epoch=by_epoch,
                                max_keep_ckpts=-1)
    if hooks.get('logger'):
        hooks.logger.interval = 1
    if cfg.get('log_processor'):
        cfg.log_processor.window_size = 1
    for hook in cfg.get('custom_hooks') or []:
        for key in list(hook.keys()):
            if key.endswith('interval'):
                hook[key] = 1
    return first


def _built_dataset(loader: dict):
    """The dataset of a loader config, built as the runner builds it (its annotations are
    read, no image is)."""
    register_all_modules(init_default_scope=False)
    with DefaultScope.overwrite_default_scope('irtbox'):  # its pipeline's transforms
        return DATASETS.build(copy.deepcopy(loader['dataset']))


def _images_per_class(sampler: dict) -> Optional[int]:
    """``m`` of a class-balanced sampler config (batches of ``batch_size // m`` classes, ``m``
    images each), None for other samplers."""
    kind = type_name(sampler)
    if kind == 'OnePerClassSampler':
        return 1
    if kind == 'MPerClassSampler':
        return int(sampler.get('m', 4))
    return None


def shrink_loaders(cfg: Config, batch_size: int, workers: int) -> List[str]:
    """Batches of at most ``batch_size``, at most ``workers`` loader workers. A class-balanced
    sampler's batch keeps at least two classes and at most as many as its dataset holds.
    Returns a line per batch sized from its data."""
    notes = []
    for where, loader in loader_cfgs(cfg):
        size = batch_size
        sampler = loader.get('sampler') or {}
        m = _images_per_class(sampler)
        if m is not None and loader.get('batch_size'):
            classes = max(2, min(int(loader['batch_size']), size) // m)
            present = len(set(get_dataset_labels(_built_dataset(loader)).tolist()))
            if present < classes:
                notes.append(f'{where}: batches of {present} classes x {m} (the data holds '
                             f'{present} classes)')
            size = max(1, min(classes, present)) * m
        if loader.get('batch_size'):
            loader['batch_size'] = min(int(loader['batch_size']), size)
            if 'batch_size' in sampler:
                sampler['batch_size'] = loader['batch_size']
        if 'num_workers' in loader:
            loader['num_workers'] = min(int(loader['num_workers']), workers)
        if not loader.get('num_workers') and loader.get('persistent_workers'):
            loader['persistent_workers'] = False  # torch refuses it without workers
    return notes


def shrink_projections(cfg: Config) -> List[str]:
    """Keep no more PCA components than the fit hook's data has descriptors: a ▷128 PCA needs
    128 images, a miniature holds a few. Returns a line per projection changed."""
    hooks = [h for h in cfg.get('custom_hooks') or [] if type_name(h) == 'PCAFitHook'
             and isinstance(h.get('dataloader'), dict)]
    necks = [n for n in config_dicts(cfg.model.get('neck')) if type_name(n) == 'PCAReduction']
    if not hooks or not necks:
        return []
    samples = min(len(_built_dataset(h['dataloader'])) for h in hooks)
    notes = []
    for neck in necks:
        if int(neck['out_dim']) > samples:
            notes.append(f'PCAReduction out_dim {neck["out_dim"]} -> {samples} (the descriptors '
                         f'its fit hook sees)')
            neck['out_dim'] = samples
    return notes


def fit_classifiers(cfg: Config) -> List[str]:
    """Give each of the head's classifiers (a loss's ``num_classes``) at least the classes of
    the training miniature: a miniature holds its own number of classes, more than a small
    config's classifier has (the digits configs' 5), and a batch drawing the extra ones would
    fail the label range check. Returns a line per classifier changed."""
    loader = cfg.get('train_dataloader')
    head = cfg.model.get('head')
    if not isinstance(loader, dict) or not isinstance(head, dict):
        return []
    classes = None
    notes = []
    for node in config_dicts(head):
        if isinstance(node.get('num_classes'), int):
            if classes is None:  # labels are contiguous class indices
                classes = int(get_dataset_labels(_built_dataset(loader)).max()) + 1
            if node['num_classes'] < classes:
                notes.append(f'{type_name(node)} num_classes {node["num_classes"]} -> '
                             f"{classes} (the miniature's training classes)")
                node['num_classes'] = classes
    return notes


# Optimizer wrappers whose autocast 'auto' leaves off on a CPU and a GPU run turns on.
_AUTOCAST_WRAPPERS = ('BF16AutocastOptimWrapper', )


def force_autocast(cfg: Config) -> Optional[str]:
    """Turn on the optimizer wrapper's autocast (``enabled=True``; ``'auto'`` is float32 on a
    CPU), so that the rehearsal runs the mixed-precision step a GPU run takes. Returns a line
    saying so, None for a wrapper without one."""
    wrapper = cfg.get('optim_wrapper') or {}
    if type_name(wrapper) not in _AUTOCAST_WRAPPERS or wrapper.get('enabled') is False:
        return None
    wrapper['enabled'] = True
    return f'{type_name(wrapper)}: autocast forced on (enabled=True), as on a GPU'


def miniaturize(cfg: Config, work_dir: str, input_size: int = DEFAULT_INPUT_SIZE,
                data_root: Optional[str] = None, subset: Optional[int] = None,
                units: int = 2, batch_size: int = 8, workers: int = 1,
                shallow: bool = False) -> Tuple[Config, Dict[str, str], List[str]]:
    """``cfg`` in miniature (see the module doc), its runs under ``<work_dir>/run``;
    ``shallow``: a transformer backbone with few blocks (:func:`shallow_backbone`).
    Returns the new config, the first phase's config options and what was changed."""
    cfg = copy.deepcopy(cfg)
    notes = point_datasets(cfg, osp.join(work_dir, 'data'), data_root, subset)
    if data_root is None:  # miniatures: their counts are not the published ones on purpose
        cfg.check_dataset_counts = False
    shallower = shallow_backbone(cfg) if shallow else None
    if shallower:
        notes.append(shallower)
    if input_size:
        notes.append(scale_input_size(cfg, input_size))
    notes.append(stand_in_weights(cfg, osp.join(work_dir, 'weights'), use_cache=not shallower))
    first = shorten_schedule(cfg, units)
    notes += [note for note in (force_autocast(cfg), ) if note]
    notes += shrink_loaders(cfg, batch_size, workers)
    notes += shrink_projections(cfg)
    if data_root is None:  # on the user's own data, a classifier too small is the user's to see
        notes += fit_classifiers(cfg)
    cfg.work_dir = osp.join(work_dir, 'run')
    return cfg, first, notes
