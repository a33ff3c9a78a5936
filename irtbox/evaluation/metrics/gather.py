"""Gathering per-sample metric results from all ranks, ordered by sample index, for the
metrics that need the whole test set at once (:class:`GatheredMetric`).

The arrays travel as tensors, in blocks of rows (:func:`gather_arrays`), through the
process group itself (NCCL on GPUs): not through MMEngine's ``collect_results``, which
pickles every rank's results into files of a folder all ranks must share (a shared
filesystem across nodes; larger and slower than a tensor: docs/benchmarks.md,
"Evaluation"), or, on the GPU, unpickles every rank's results on every rank.
"""
import logging
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.distributed
from mmengine.dist import (all_gather_object, broadcast_object_list, get_comm_device,
                           get_world_size, is_main_process)
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log

from irtbox.utils.dist import fail_together
from ..functional.checks import non_finite_rows

__all__ = ['GatheredMetric', 'embedding_to_numpy', 'check_finite_embeddings']

# Rows checked at a time: a bool mask of a whole 1M x 768 test set would take 0.8 GB.
_FINITE_ROWS = 1 << 16
# Bytes of one rank's block per all_gather: a rank receives world x this at a time.
_BLOCK_BYTES = 32 << 20


def embedding_to_numpy(embedding) -> np.ndarray:
    """A data sample's embedding (tensor or array) as a flat float32 numpy vector on the CPU."""
    if isinstance(embedding, torch.Tensor):
        return embedding.detach().float().cpu().numpy().reshape(-1)
    return np.asarray(embedding, dtype=np.float32).reshape(-1)


def pack_results(results: List[dict]) -> Optional[Dict[str, np.ndarray]]:
    """Per-sample dicts (same keys, one of them ``sample_idx``) -> one stacked
    array per key, cheap to send between ranks; ``None`` if empty."""
    if not results:
        return None
    packed = {key: np.stack([np.asarray(r[key]) for r in results]) for key in results[0]}
    packed['sample_idx'] = packed['sample_idx'].astype(np.int64)
    return packed


def merge_by_sample_idx(parts: Sequence[Optional[dict]],
                        size: Optional[int],
                        consistent: Optional[Dict[str, str]] = None) -> Dict[str, np.ndarray]:
    """Concatenate packed parts, order by sample index, drop repeated indices.

    Args:
        parts: outputs of :func:`pack_results` (``None`` for an empty part).
        size: the dataset size, for a warning when fewer or more distinct
            samples arrived; ``None`` skips the check.
        consistent: keys that a repeated sample index must repeat unchanged (a clash means two
            different samples share an index), mapped to their name in the error message.

    Returns:
        One array per key, rows in increasing ``sample_idx``.
    """
    parts = [p for p in parts if p is not None]
    if not parts:
        raise ValueError('no sample was processed; expected the predict outputs of the '
                         'test set in process().')
    data = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    order = np.argsort(data['sample_idx'], kind='stable')
    idx = data['sample_idx'][order]
    first = np.ones(len(idx), dtype=bool)
    first[1:] = idx[1:] != idx[:-1]
    group_start = np.maximum.accumulate(np.where(first, np.arange(len(idx)), 0))
    for key, what in (consistent or {}).items():
        values = data[key][order]
        clash = (values != values[group_start]).reshape(len(idx), -1).any(axis=1)
        if clash.any():
            bad = idx[np.argmax(clash)]
            raise ValueError(f'sample_idx {bad} arrives with different {what}; '
                             'sample_idx must identify one sample of the test set (e.g. '
                             'datasets concatenated without re-indexing).')
    data = {key: value[order[first]] for key, value in data.items()}
    if size is not None and len(data['sample_idx']) != size:
        print_log(f'{len(data["sample_idx"])} distinct test samples were evaluated but '
                  f'the dataset has {size}.', logger='current', level=logging.WARNING)
    return data


def gather_arrays(part: Optional[Dict[str, np.ndarray]]) -> Optional[List[Optional[dict]]]:
    """Every rank's ``part`` (arrays of equal length under the same keys, or None), in rank
    order, on rank 0; None on the other ranks (a collective: every rank calls it).

    Each array is sent to rank 0 as a tensor in padded blocks of rows (``gather``, not
    ``all_gather``: only rank 0 receives and keeps them), each block at most 32 MB and no
    longer than the largest part (the parts' sizes travel first), so rank 0 holds one block
    from each rank at a time, whatever the size of the test set, and a small part sends little.
    """
    world = get_world_size()
    if world == 1:
        return [part]
    layout = None if part is None else {
        key: (value.dtype.str, value.shape[1:]) for key, value in part.items()}
    rows = 0 if part is None else len(next(iter(part.values())))
    shared = all_gather_object((rows, layout))
    sizes = [n for n, _ in shared]
    layout = next((lay for _, lay in shared if lay is not None), None)
    if layout is None:  # no rank processed anything
        return [None] * world if is_main_process() else None
    main, device = is_main_process(), get_comm_device()
    out = [dict() if n else None for n in sizes] if main else None
    for key, (dtype, trailing) in layout.items():
        dtype = np.dtype(dtype)
        row_bytes = max(1, dtype.itemsize * int(np.prod(trailing, dtype=np.int64)))
        block = max(1, _BLOCK_BYTES // row_bytes)
        local = part[key] if part is not None else np.empty((0, ) + tuple(trailing), dtype)
        # bool travels as uint8: not every backend reduces or gathers bool tensors
        local = local.view(np.uint8) if dtype == np.bool_ else local
        gathered = [[] for _ in range(world)] if main else None
        for start in range(0, max(sizes), block):
            chunk = np.zeros((min(block, max(sizes) - start), ) + tuple(trailing), local.dtype)
            mine = local[start:start + len(chunk)]
            chunk[:len(mine)] = mine
            chunk = torch.from_numpy(chunk).to(device)
            parts = [torch.empty_like(chunk) for _ in range(world)] if main else None
            torch.distributed.gather(chunk, parts, dst=0)
            if main:
                for rank, tensor in enumerate(parts):
                    keep = max(0, min(len(chunk), sizes[rank] - start))
                    if keep:
                        gathered[rank].append(tensor[:keep].cpu().numpy())
        if main:
            for rank, blocks in enumerate(gathered):
                if sizes[rank]:
                    out[rank][key] = np.concatenate(blocks).view(dtype)
    return out


def gather_by_sample_idx(results: List[dict],
                         size: Optional[int],
                         consistent: Optional[Dict[str, str]] = None
                         ) -> Optional[Dict[str, np.ndarray]]:
    """Every rank's per-sample results (:func:`gather_arrays`), merged by
    :func:`merge_by_sample_idx`.

    Collective: call on every rank. Returns the merged arrays on the main
    process and ``None`` elsewhere.
    """
    parts = gather_arrays(pack_results(results))
    if not is_main_process():
        return None
    return merge_by_sample_idx(parts, size, consistent)


def check_finite_embeddings(embeddings: np.ndarray, sample_idx: np.ndarray, metric: str) -> None:
    """Raise ``ValueError`` when rows of the gathered n x D ``embeddings`` hold NaN or inf,
    naming how many and the first sample indices: a model that outputs NaN would otherwise
    be scored (and its results file written) as if nothing were wrong."""
    bad = non_finite_rows(embeddings, _FINITE_ROWS)
    if len(bad):
        shown = ', '.join(str(int(i)) for i in sample_idx[bad[:5]])
        raise ValueError(f'{metric}: the model gave non-finite (NaN or inf) embeddings for '
                         f'{len(bad)} of {len(embeddings)} test images (sample_idx {shown}'
                         f'{" ..." if len(bad) > 5 else ""}); check the checkpoint for NaN '
                         'weights. Nothing is scored.')


class GatheredMetric(BaseMetric):
    """A metric of the whole test set at once: every rank's per-sample results gathered by
    sample index (:func:`gather_by_sample_idx`), computed on rank 0 by ``_compute`` and
    broadcast. The DefaultSampler's padding is dropped by removing repeated sample indices
    (not, as BaseMetric does, by relying on the sampler's order).

    Subclasses set ``consistent`` (what a repeated sample index must repeat, as
    :func:`merge_by_sample_idx` takes it), ``field_source`` (who sets each per-sample field,
    for the error when one is missing; the embedding's and the sample index's are set here)
    and ``prefix_names`` (whether :meth:`evaluate` puts ``prefix/`` before the names).
    """
    default_prefix: Optional[str] = None
    consistent: Dict[str, str] = {}
    field_source: Dict[str, str] = {
        'embedding': "set by the retriever in mode='predict'",
        'sample_idx': 'set by the dataset (MMEngine BaseDataset adds it to every sample)',
    }
    prefix_names = True
    last_outputs: Optional[Dict[str, np.ndarray]] = None

    def compute_metrics(self, results: List[dict]) -> Dict[str, float]:
        """Metrics of per-sample results as stored by ``process`` (one process)."""
        return self._compute(merge_by_sample_idx([pack_results(results)], None, self.consistent))

    def evaluate(self, size: int) -> Dict[str, float]:
        """Gather every rank's results by sample index, compute on rank 0, broadcast (an
        error on rank 0 reaches every rank first: :func:`~irtbox.utils.dist.fail_together`)."""
        parts = gather_arrays(pack_results(self.results))
        self.results.clear()
        out = [None]
        with fail_together(f'{type(self).__name__}: computing the metrics on rank 0'):
            if is_main_process():
                out[0] = self._compute(merge_by_sample_idx(parts, size, self.consistent))
                if self.prefix_names and self.prefix:
                    out[0] = {f'{self.prefix}/{k}': v for k, v in out[0].items()}
            else:
                self.last_outputs = None
        broadcast_object_list(out)
        return out[0]

    def _field(self, sample, key: str):
        """``sample``'s ``key``, else a KeyError saying who sets it and what the sample has."""
        value = sample.get(key)
        if value is None:
            keys = getattr(sample, 'all_keys', sample.keys)
            raise KeyError(f'{type(self).__name__}.process: a data sample has no {key!r} '
                           f'({self.field_source.get(key, "set by the model")}); it has '
                           f'{sorted(keys())}.')
        return value
