"""Hard-negative tuple mining for SfM-120k training (Radenovic et al., TPAMI 2018)."""
from contextlib import ExitStack
from typing import Optional

import numpy as np
import torch
from mmengine.dataset import Compose, pseudo_collate
from mmengine.dist import broadcast_object_list, get_dist_info
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.runner import EpochBasedTrainLoop
from mmengine.utils import ProgressBar
from torch.utils.data import DataLoader, Dataset

from irtbox.evaluation.functional.ranking import similarity_blocks
from irtbox.models.necks import FittedProjection
from irtbox.registry import HOOKS, TRANSFORMS
from irtbox.utils.checks import check_int
from irtbox.utils.dist import gather_round_robin
from .utils import bare_model

__all__ = ['check_enough_clusters', 'mine_hard_negatives', 'TupleMiningHook']


def check_enough_clusters(q_clusters, pool_clusters, nnum: int) -> None:
    """Raise ValueError when, for some query, the pool holds fewer than
    ``nnum`` clusters other than the query's (at most one negative per cluster)."""
    q_clusters = np.asarray(q_clusters).reshape(-1)
    distinct = np.unique(np.asarray(pool_clusters))
    others = len(distinct) - np.isin(q_clusters, distinct)
    bad = np.flatnonzero(others < nnum)
    if bad.size:
        i = bad[0]
        raise ValueError(
            f'hard-negative mining: the pool of {np.size(pool_clusters)} images holds only '
            f'{others[i]} clusters other than that of query {i} (cluster {q_clusters[i]}), '
            f'but {nnum} negatives from distinct clusters are needed; use a larger pool '
            '(poolsize) or fewer negatives (nnum)')


def mine_hard_negatives(q_desc, pool_desc, q_clusters, pool_clusters, nnum: int = 5,
                        chunk_size: int = 256) -> np.ndarray:
    """The hardest negatives of each query, at most one per cluster. For each query, the pool is
    walked by decreasing similarity ``q · x`` (ties: pool order); a candidate becomes a negative
    when its cluster is neither the query's nor that of a negative already chosen, until ``nnum``
    (Radenovic et al., TPAMI 2018, Sec. 3.3). Memory O(chunk_size x P).

    Args:
        q_desc: (Q, D) L2-normalised query descriptors.
        pool_desc: (P, D) pool descriptors, same device as ``q_desc``.
        q_clusters, pool_clusters: (Q,), (P,) cluster ids.

    Returns:
        (Q, nnum) int64 array of positions in the pool, hardest first.
    """
    q_desc, pool_desc = torch.as_tensor(q_desc), torch.as_tensor(pool_desc)
    q_clusters = np.asarray(q_clusters).reshape(-1)
    pool_clusters = np.asarray(pool_clusters).reshape(-1)
    if q_desc.ndim != 2 or pool_desc.ndim != 2 or q_desc.shape[1] != pool_desc.shape[1]:
        raise ValueError(f'mine_hard_negatives: expected Q x D queries and P x D pool '
                         f'descriptors, got {tuple(q_desc.shape)} and {tuple(pool_desc.shape)}')
    if len(q_clusters) != len(q_desc) or len(pool_clusters) != len(pool_desc):
        raise ValueError(f'mine_hard_negatives: {len(q_desc)} queries / {len(pool_desc)} pool '
                         f'images but {len(q_clusters)} / {len(pool_clusters)} cluster ids')
    if nnum < 1 or chunk_size < 1:
        raise ValueError(f'mine_hard_negatives: nnum and chunk_size must be >= 1, got '
                         f'{nnum} and {chunk_size}')
    check_enough_clusters(q_clusters, pool_clusters, nnum)
    negatives = np.empty((len(q_desc), nnum), dtype=np.int64)
    for start, sims in similarity_blocks(q_desc.float(), pool_desc.float(), chunk_size):
        order = torch.sort(sims, dim=1, descending=True, stable=True).indices.cpu().numpy()
        for row, ranking in enumerate(order):
            negatives[start + row] = _walk(ranking, pool_clusters, q_clusters[start + row], nnum)
    return negatives


def _walk(ranking: np.ndarray, pool_clusters: np.ndarray, q_cluster, nnum: int) -> list:
    chosen, used = [], {q_cluster}
    for j in ranking:  # usually stops after a few steps
        c = pool_clusters[j]
        if c not in used:
            chosen.append(j)
            used.add(c)
            if len(chosen) == nnum:
                break
    return chosen


class _ImageSubset(Dataset):
    """Images ``indices`` of a dataset (by ``get_data_info``) through ``pipeline``."""

    def __init__(self, dataset, indices: np.ndarray, pipeline):
        self.dataset, self.indices, self.pipeline = dataset, indices, pipeline

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, k):
        return self.pipeline(self.dataset.get_data_info(int(self.indices[k])))


@HOOKS.register_module()
class TupleMiningHook(Hook):
    """Mines the training tuples of a tuple dataset before every epoch (Radenovic et al.,
    "Fine-tuning CNN Image Retrieval with No Human Annotation", TPAMI 2018, Sec. 3.3).

    Draws ``len(dataset)`` query/positive pairs and a pool of ``poolsize`` images of the split,
    embeds them with the current model (eval mode, single scale, projections learned after training
    passed through: the descriptor the loss trains), takes each query's ``dataset.nnum`` hardest
    negatives (:func:`mine_hard_negatives`) and hands the tuples to ``dataset.set_tuples``.

    The draw is seeded by (``seed`` or the runner's seed, epoch), so resumed runs mine as
    uninterrupted ones. Under DDP each rank embeds every ``world_size``-th image; rank 0 mines and
    broadcasts the tuples. Needs an epoch-based loop, a dataset like ``SfM120kDataset(tuples=True)``
    and ``persistent_workers=False`` (workers forked each epoch see the new tuples).

    Args:
        poolsize (int): Images in the negative pool (at most the split's).
        dataloader (dict | None): ``batch_size`` (32), ``num_workers`` (0) and ``pipeline``
            (default: the train dataset's; give the test one when training augments).
        chunk_size (int): Queries per similarity block in the search.
        seed (int | None): None: the runner's seed.
    """

    priority = 'NORMAL'
    _LOADER_KEYS = ('batch_size', 'num_workers', 'pipeline')

    def __init__(self,
                 poolsize: int = 22000,
                 dataloader: Optional[dict] = None,
                 chunk_size: int = 256,
                 seed: Optional[int] = None):
        dataloader = dict(dataloader or {})
        unknown = sorted(set(dataloader) - set(self._LOADER_KEYS))
        if unknown:
            raise ValueError(f'TupleMiningHook: unknown key(s) {unknown} in dataloader; '
                             f'expected some of {list(self._LOADER_KEYS)}')
        self.poolsize = check_int(poolsize, 'TupleMiningHook: poolsize')
        self.chunk_size = check_int(chunk_size, 'TupleMiningHook: chunk_size')
        self.batch_size = check_int(dataloader.get('batch_size', 32), 'TupleMiningHook: batch_size')
        self.num_workers = dataloader.get('num_workers', 0)
        self.pipeline_cfg = dataloader.get('pipeline')
        self.seed = seed
        self._pipeline = None

    def before_train_epoch(self, runner) -> None:
        dataset = self._check_setup(runner)
        seed = self.seed if self.seed is not None else runner.seed
        rng = np.random.default_rng([int(seed), int(runner.epoch)])
        num_tuples, clusters = len(dataset), dataset.clusters
        pairs = rng.permutation(len(dataset.qidxs))[:num_tuples]
        qidxs, pidxs = dataset.qidxs[pairs], dataset.pidxs[pairs]
        pool = rng.permutation(dataset.num_images)[:self.poolsize]
        # Every rank fails alike, before any extraction.
        check_enough_clusters(clusters[qidxs], clusters[pool], dataset.nnum)

        desc = self._extract(runner, dataset, np.concatenate([qidxs, pool]))
        result = [None]
        if get_dist_info()[0] == 0:
            q_desc, pool_desc = desc[:num_tuples], desc[num_tuples:]
            found = mine_hard_negatives(q_desc, pool_desc, clusters[qidxs], clusters[pool],
                                        dataset.nnum, self.chunk_size)
            diff = q_desc[:, None] - pool_desc[torch.as_tensor(found, device=desc.device)]
            print_log(f'\nTupleMiningHook: epoch {runner.epoch + 1}: {num_tuples} tuples, pool of '
                      f'{len(pool)} images, average query-negative L2 distance '
                      f'{diff.norm(dim=-1).mean().item():.4f}', logger='current')
            result = [pool[found]]
        broadcast_object_list(result)
        dataset.set_tuples(qidxs, pidxs, result[0])

    def _check_setup(self, runner):
        if not isinstance(runner.train_loop, EpochBasedTrainLoop):
            raise TypeError('TupleMiningHook mines new tuples every epoch; use '
                            "train_cfg=dict(type='EpochBasedTrainLoop', ...), got "
                            f'{type(runner.train_loop).__name__}')
        loader = runner.train_dataloader
        dataset = loader.dataset
        if not all(hasattr(dataset, a) for a in ('set_tuples', 'qidxs', 'pidxs', 'clusters',
                                                  'num_images', 'nnum')) \
                or not getattr(dataset, 'tuples', False):
            raise TypeError('TupleMiningHook: the train dataset must be a tuple dataset '
                            '(e.g. SfM120kDataset with tuples=True), got '
                            f'{type(dataset).__name__}')
        if loader.num_workers > 0 and loader.persistent_workers:
            raise ValueError('TupleMiningHook: set persistent_workers=False in '
                             'train_dataloader; persistent workers keep the tuples of the '
                             'epoch they were started in')
        return dataset

    def _build_pipeline(self, dataset):
        if self._pipeline is None:
            self._pipeline = dataset.pipeline if self.pipeline_cfg is None else Compose(
                [TRANSFORMS.build(t) if isinstance(t, dict) else t for t in self.pipeline_cfg])
        return self._pipeline

    @torch.no_grad()
    def _extract(self, runner, dataset, indices: np.ndarray) -> torch.Tensor:
        """n x D descriptors of images ``indices`` on every rank."""
        rank, world = get_dist_info()
        n = len(indices)
        if n < world:
            raise ValueError(f'TupleMiningHook: {n} images to extract for {world} ranks')
        loader = DataLoader(
            _ImageSubset(dataset, indices[rank::world], self._build_pipeline(dataset)),
            batch_size=self.batch_size, num_workers=self.num_workers, shuffle=False,
            collate_fn=pseudo_collate)
        model = bare_model(runner)
        was_training = model.training
        # Mining ranks with single-scale descriptors before any whitening (which is learned
        # after training), as the reference implementation.
        scales = getattr(model, 'test_scales', None)
        if scales is not None:
            model.test_scales = (1.0, )
        model.eval()
        progress = ProgressBar(len(loader)) if rank == 0 else None
        try:
            with ExitStack() as projections:
                for module in model.modules():
                    # A projection learned after training is the identity while the
                    # network trains: mining ranks by the descriptor the loss sees.
                    if isinstance(module, FittedProjection) and not module.train_projected:
                        projections.enter_context(module.passthrough())
                feats = []
                extract = getattr(model, 'extract_raw_feat', None)
                for batch in loader:
                    data = model.data_preprocessor(batch, False)
                    feats.append(extract(data['inputs']) if extract else
                                 model(**data, mode='tensor'))
                    if progress:
                        progress.update()
        finally:
            if scales is not None:
                model.test_scales = scales
            model.train(was_training)
        return gather_round_robin(torch.cat(feats), n)
