"""What a dataset class declares about the data it reads, beside its code: a
:class:`DatasetSpec` in its ``specs`` attribute (a tuple: ``RevisitedDataset`` reads three
published datasets; :class:`DatasetSpec` and :class:`RemoteFile` say what a spec holds).
Preparing and checking (irtbox.ops), the count check of every run and the miniatures find the specs
through the registered classes (:func:`dataset_specs`): adding a dataset is one module.
Sizes marked ``approx=True`` are estimates (not published).
"""
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from irtbox.registry import DATASETS, type_name

__all__ = ['FLICKR_TERMS', 'GB', 'PML_CHECKSUMS', 'RemoteFile', 'CountView', 'DatasetSpec',
           'COUNT_KEYS', 'count_differences', 'count_mismatch', 'dataset_counts', 'dataset_spec',
           'dataset_specs', 'extra_specs', 'matching_view', 'official_layout', 'spec_of_config']

GB = 10**9
# Sources that several datasets share.
PML_CHECKSUMS = ("pytorch-metric-learning's dataset code (K. Musgrave, an author of the "
                 'recipe benchmark)')
FLICKR_TERMS = ('The images come from Flickr and remain their owners\' property; the '
                'annotations are released for research. Use them for non-commercial research '
                'and cite the paper.')


@dataclass(frozen=True)
class RemoteFile:
    """One published file and where its content goes under the dataset root.

    Attributes:
        name: The file name (also its name on a mirror and in a folder of files fetched by hand).
        url: The official address; empty for files behind a form or terms (manual).
        md5 / sha256: The published checksum, if any; ``checksum_source`` says who publishes it.
        md5_url: A published file holding the md5 (its first word), fetched first (GLDv2).
        size: Bytes to download (``approx`` when not published).
        unpacked: Bytes on disk after unpacking.
        unpack: ``'tar'`` (any compression), ``'zip'`` or ``''`` (placed as it is).
        dest: Folder under the root the file or the archive's content goes to.
        prefix: Only archive members under this folder are kept, without it.
        flatten: Keep only the members' file names (ROxford / RParis archives nest folders).
        include: Shell patterns a member's file name must match (all when empty).
        folder: A folder the user supplies among the files fetched by hand (images fetched by URL);
            linked into place, never copied.
    """

    name: str
    url: str = ''
    md5: Optional[str] = None
    sha256: Optional[str] = None
    checksum_source: str = ''
    md5_url: Optional[str] = None
    size: int = 0
    unpacked: int = 0
    approx: bool = False
    unpack: str = ''
    dest: str = ''
    prefix: str = ''
    flatten: bool = False
    include: Tuple[str, ...] = ()
    folder: bool = False
    optional: bool = False


@dataclass(frozen=True)
class CountView:
    """What one split of the dataset must count, and the dataset config that reads it.

    ``dataset``: the config (without ``data_root``) of the class a shipped config builds.
    ``images`` / ``classes`` / ``queries`` / ``database``: the published counts (None: not
    published, reported only). ``exact=False``: the counts vary with the copy (URL lists
    with dead links) and a mismatch is reported, not an error.
    """

    name: str
    dataset: dict
    images: Optional[int] = None
    classes: Optional[int] = None
    queries: Optional[int] = None
    database: Optional[int] = None
    exact: bool = True


def official_layout(cfg: dict, root: str) -> None:
    """Point a dataset config at a miniature written under ``root`` in the official
    layout: ``data_root=root``, and ``ann_file`` and ``data_prefix`` back to the class
    defaults (the official names the miniature uses)."""
    cfg.update(data_root=root, ann_file='', data_prefix=None)


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset a class reads: its name (``irtbox prepare NAME``, the miniature kind,
    ``data/NAME``), its files in the order they are prepared, its splits' counts and terms,
    and its miniature.

    A spec without ``files`` is not prepared (a format for a user's own data, e.g.
    ``FolderDataset``); one without ``miniature`` has no miniature.

    Attributes:
        manual: Where to get files behind a form or terms, what to accept (naming
            :func:`~irtbox.ops.prepare.prepare_dataset`'s arguments).
        miniature: ``miniature(root, image_fn, **options)`` writes a tiny copy in the
            official layout (:func:`irtbox.ops.miniature.write_miniature`).
        point: ``point(cfg, root)`` sets the keys of a dataset config (the class's, in
            place) that make it read the miniature written under ``root``.
        also_read_with: A config key of the class that makes a config read this dataset too
            (the R1M distractors of a ``RevisitedDataset``: ``distractors_list``).
    """

    name: str
    title: str = ''
    homepage: str = ''
    files: Tuple[RemoteFile, ...] = ()
    views: Tuple[CountView, ...] = ()
    terms: str = ''
    manual: str = ''
    miniature: Optional[Callable] = None
    point: Callable[[dict, str], None] = official_layout
    also_read_with: str = ''

    @property
    def default_root(self) -> str:
        return f'data/{self.name}'

    @property
    def download_bytes(self) -> int:
        return sum(f.size for f in self.files)


def _declared() -> Iterator[Tuple[type, DatasetSpec]]:
    """(class, spec) of every registered dataset class that declares specs itself (a
    subclass does not inherit them: it reads another format). The built-in classes are
    registered: this module is imported by ``irtbox.datasets``, which imports them all."""
    for cls in list(DATASETS.module_dict.values()):
        for spec in vars(cls).get('specs', ()):
            yield cls, spec


def dataset_specs(preparable: bool = False) -> Dict[str, DatasetSpec]:
    """{name: spec} of every registered dataset class, sorted by name; with ``preparable``
    only those with files to prepare. Two classes declaring one name is an error."""
    specs, owner = {}, {}
    for cls, spec in _declared():
        if spec.name in specs:
            raise ValueError(f'the dataset name {spec.name!r} is declared by both '
                             f'{owner[spec.name]} and {cls.__name__}')
        specs[spec.name], owner[spec.name] = spec, cls.__name__
    return {name: specs[name] for name in sorted(specs)
            if specs[name].files or not preparable}


def dataset_spec(name: str, preparable: bool = False) -> DatasetSpec:
    """The spec named ``name`` (:func:`dataset_specs`); an unknown name is an error listing
    the known ones."""
    specs = dataset_specs(preparable)
    if name not in specs:
        raise ValueError(f'unknown dataset {name!r}; expected one of {sorted(specs)}')
    return specs[name]


# Arguments that select a split or how it is read, not which dataset.
_NOT_DISTINGUISHING = ('type', 'split', 'skip_missing')


def matching_view(name: str, args: dict, ignore: Tuple[str, ...] = _NOT_DISTINGUISHING
                  ) -> Optional[Tuple[DatasetSpec, CountView]]:
    """The first (spec, split) built by class ``name`` with the arguments ``args`` (those in
    ``ignore`` aside; an argument ``args`` leaves out takes the split's value), or None."""
    for _, spec in _declared():
        for view in spec.views:
            if view.dataset['type'] == name and all(
                    args.get(k, v) == v for k, v in view.dataset.items() if k not in ignore):
                return spec, view
    return None


def spec_of_config(dataset_cfg: dict) -> Optional[DatasetSpec]:
    """The spec of the data a dataset config reads: the first whose splits are built by the same
    class with the same distinguishing arguments (e.g. ``dataset_name``), else the one spec its
    class declares; None when neither (the config's class reads no declared dataset, or several)."""
    name = type_name(dataset_cfg.get('type'))
    match = matching_view(name, dataset_cfg)
    if match:
        return match[0]
    own = [spec for cls, spec in _declared() if cls.__name__ == name and not spec.also_read_with]
    return own[0] if len(own) == 1 else None


def extra_specs(dataset_cfg: dict) -> Tuple[DatasetSpec, ...]:
    """The specs a config of its class reads besides its own, for the keys it sets
    (``also_read_with``)."""
    name = type_name(dataset_cfg.get('type'))
    return tuple(spec for cls, spec in _declared() if cls.__name__ == name
                 and spec.also_read_with and dataset_cfg.get(spec.also_read_with))


COUNT_KEYS = ('images', 'classes', 'queries', 'database')


def dataset_counts(dataset) -> Dict[str, int]:
    """What a built dataset holds, read from its annotation only: ``images``, ``classes``
    (labelled datasets), ``queries`` (query/gallery splits), ``database`` (revisited)."""
    meta = getattr(dataset, 'metainfo', {}) or {}
    if 'num_database' in meta:  # RevisitedDataset: distractors are not part of the set
        return dict(queries=int(meta['num_queries']), database=int(meta['num_database']))
    # SfM120kDataset's len() counts tuples in tuple mode, its num_images the images.
    counts = dict(images=int(getattr(dataset, 'num_images', len(dataset))))
    if hasattr(dataset, 'get_gt_labels'):
        counts['classes'] = int(len(set(dataset.get_gt_labels().tolist())))
    mask = dataset.get_query_mask() if hasattr(dataset, 'get_query_mask') else None
    if mask is not None:
        counts['queries'] = int(mask.sum())
        counts['database'] = int(len(mask) - mask.sum())
    return counts


def count_differences(counts: Dict[str, int], expected: Dict[str, Optional[int]]) -> List[str]:
    return [f'{counts[k]:,} {k} (published: {expected[k]:,})' for k in COUNT_KEYS
            if expected.get(k) is not None and k in counts and counts[k] != expected[k]]


def count_mismatch(dataset) -> Optional[str]:
    """One line when ``dataset`` is a split of a published dataset and its counts are not the
    published ones (a subset by ``indices`` is not checked); None otherwise."""
    args = {k: getattr(dataset, k) for k in ('split', 'dataset_name') if hasattr(dataset, k)}
    match = matching_view(type(dataset).__name__, args, ignore=('type', 'skip_missing'))
    if match is None or not match[1].exact or getattr(dataset, '_indices', None) is not None:
        return None
    name, view = match[0].name, match[1]
    expected = {k: getattr(view, k) for k in COUNT_KEYS}
    wrong = count_differences(dataset_counts(dataset), expected)
    if not wrong:
        return None
    root = getattr(dataset, 'data_root', '') or '.'
    return (f'{name} {view.name} under {root}: {", ".join(wrong)}; the numbers will not be '
            f'comparable with published ones: check it (check_dataset({name!r}, root={root!r}))')
