"""α-weighted query expansion (αQE) and database-side augmentation (αDBA).

Radenović, Tolias, Chum, "Fine-tuning CNN Image Retrieval with No Human Annotation", TPAMI 2018,
Sec. 4.3 (αQE) and the αDBA of the revisited Oxford / Paris benchmark (Radenović et al., CVPR 2018).
Both take and give embeddings; the neighbours come from the exact chunked search
(:class:`~irtbox.evaluation.neighbours.ExactSearcher`: memory O(chunk_size x N), ties to the lower
index, consumed a chunk at a time), never from an N x N matrix.

Every vector is L2-normalised first (written x̂), and with s the inner product of normalised vectors
a neighbour weighs w(s) = s^α for s > 0 and 0 otherwise (a neighbour at negative similarity does not
pull; s^α is also undefined there for fractional α). The vector itself weighs 1 = s(x̂, x̂)^α.
"""
from typing import Optional, Union

import numpy as np
import torch
import torch.nn.functional as F

from irtbox.utils.checks import check_int
from irtbox.utils.errors import ArgumentError
from ..neighbours import ExactSearcher
from .checks import ArrayLike, as_float_matrix
from .ranking import prepare_pair

__all__ = ['alpha_query_expansion', 'alpha_database_augmentation']


def alpha_query_expansion(query: ArrayLike,
                          database: ArrayLike,
                          k: int = 2,
                          alpha: float = 3.0,
                          chunk_size: int = 1024,
                          device: Optional[Union[str, torch.device]] = None) -> ArrayLike:
    """αQE: q' = normalise(q̂ + Σ_{i=1..k} w(s_i) x̂_{r_i}).

    r_1..r_k are the k database items most similar to q̂ (s_i = q̂ᵀx̂_{r_i}), so k + 1 vectors are
    summed, the query itself included with weight 1. k = 0 only normalises.

    Args:
        query: n_q x D; database: N x D (arrays or tensors).
        k: database neighbours added (clipped to N).
        alpha: the exponent α >= 0 (α = 0: plain average of the query and its
            positively similar neighbours).
        chunk_size, device: of the search (:class:`~irtbox.evaluation.neighbours.ExactSearcher`).

    Returns:
        n_q x D float32 unit rows, numpy for numpy ``query``, a tensor on its
        device for tensor ``query``.
    """
    return _expand(query, database, k, alpha, chunk_size, device, exclude_self=False)


def alpha_database_augmentation(database: ArrayLike,
                                k: int = 2,
                                alpha: float = 3.0,
                                chunk_size: int = 1024,
                                device: Optional[Union[str, torch.device]] = None
                                ) -> ArrayLike:
    """αDBA: x'_j = normalise(x̂_j + Σ_{i=1..k} w(s_ji) x̂_{n_ji}) for every database item j.

    n_j1..n_jk are the k database items most similar to x̂_j other than j itself (excluded by index,
    so duplicates still count). All sums use the original vectors (one pass, not iterated).

    Args:
        database: N x D (array or tensor).
        k: neighbours added (clipped to N - 1).
        alpha: the exponent α >= 0.
        chunk_size, device: of the search (:class:`~irtbox.evaluation.neighbours.ExactSearcher`).

    Returns:
        N x D float32 unit rows, numpy or tensor as ``database``.
    """
    return _expand(database, database, k, alpha, chunk_size, device, exclude_self=True)


def _expand(x, pool, k, alpha, chunk_size, device, exclude_self):
    k = check_int(k, 'k', minimum=0)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.number)) \
            or not alpha >= 0 or not np.isfinite(alpha):
        raise ArgumentError(f'alpha must be a finite number >= 0, got {alpha!r}.', 'alpha')
    as_tensor = isinstance(x, torch.Tensor)
    out_device = x.device if as_tensor else torch.device('cpu')
    if exclude_self:
        x_t = pool_t = F.normalize(as_float_matrix(x, 'database'), dim=1)
    else:
        x_t, pool_t = prepare_pair(x, pool, normalize=True, names=('query', 'database'),
                                   role='database')
    out = x_t.clone()
    if k > 0 and len(pool_t) > int(exclude_self):
        k = min(k, len(pool_t) - int(exclude_self))
        searcher = ExactSearcher(chunk_size, out_device if device is None else device)
        for block in searcher.search(x_t, pool_t, k,
                                     np.arange(len(x_t)) if exclude_self else None):
            sims, idx = block.scores.to(out_device), block.ids.to(out_device)
            weights = torch.where(sims > 0, sims.clamp(min=0).pow(float(alpha)),
                                  torch.zeros_like(sims))
            # Neighbour vectors of one chunk: chunk x k x D.
            rows = slice(block.start, block.start + len(idx))
            out[rows] += (weights[:, :, None] * pool_t[idx]).sum(dim=1)
    out = F.normalize(out, dim=1)
    return out if as_tensor else out.numpy()
