"""SuperGlobal re-ranking (Shao, Chen, Li, Zhou, Wang, "Global Features are All You Need for
Image Retrieval and Reranking", ICCV 2023; the official repository's ``MDescAug`` then
``RerankwMDA``), with global descriptors only.

Equations and defaults: docs/methods/reranking.md. Per query q, on its top M candidates
x_1..x_M (unit rows):

- each candidate's descriptor is refined from its K + 1 nearest among the candidates (itself
  first): x'_b = (x_b + β Σ_{t=2..K+1} s_bt x_(t)) / (1 + β Σ_t s_bt), s the cosines;
- r_b = qᵀx'_b; the expanded query is the element-wise max of the K + 1 refined descriptors of
  highest r;
- the final score is (r_b + q_expᵀx'_b) / 2; candidates after M keep their order and scores.

Memory: chunk_size x M x D per chunk of queries (the defaults: 400 x 2048 floats a query).
"""
from typing import Tuple

import numpy as np
import torch

from irtbox.utils.checks import check_positive_int
from ..neighbours.index import normalize as unit_rows

__all__ = ['superglobal_rerank']


def superglobal_rerank(query, database, ids, scores, m: int = 400, k: int = 9, beta: float = 0.15,
                       chunk_size: int = 16) -> Tuple[np.ndarray, np.ndarray]:
    """Re-rank the top ``m`` of each query's candidates by SuperGlobal's score.

    Args:
        query: Q x D; database: N x D (an array that slices, e.g. a memmap).
        ids, scores: Q x K candidates and their scores, best first.
        m, k, beta: the official repository's M = 400, K = 9, β = 0.15.
        chunk_size: queries re-ranked at once.

    Returns:
        (Q x K ids, Q x K scores), the top min(m, K) re-ranked, the rest as given.
    """
    m, k = check_positive_int(m, 'm'), check_positive_int(k, 'k')
    chunk_size = check_positive_int(chunk_size, 'chunk_size')
    ids = np.asarray(ids, dtype=np.int64)
    out_ids, out_scores = ids.copy(), np.array(scores, dtype=np.float64)
    m = min(m, ids.shape[1])
    for start in range(0, len(ids), chunk_size):
        rows = slice(start, start + chunk_size)
        top = ids[rows, :m]
        q = torch.from_numpy(unit_rows(query[rows]))
        x = torch.from_numpy(unit_rows(database[top.reshape(-1)])).view(*top.shape, -1)
        # Each candidate's K + 1 nearest among the candidates (itself first), best first.
        sims, near = torch.sort(x @ x.transpose(1, 2), dim=2, descending=True, stable=True)
        weights = sims[:, :, :k + 1] * beta
        weights[:, :, 0] = 1
        # The weights as a chunk x M x M matrix (a gather of chunk x M x (K + 1) x D is larger).
        mixing = torch.zeros_like(sims).scatter_(2, near[:, :, :k + 1], weights)
        refined = (mixing @ x) / weights.sum(2, keepdim=True)
        first = torch.einsum('qd,qmd->qm', q, refined)
        best = torch.sort(first, dim=1, descending=True, stable=True)[1][:, :k + 1]
        expanded = torch.gather(refined, 1, best[..., None].expand(-1, -1, x.shape[2])).amax(1)
        final = (first + torch.einsum('qd,qmd->qm', expanded, refined)) / 2
        final, order = torch.sort(final, dim=1, descending=True, stable=True)
        out_ids[rows, :m] = np.take_along_axis(top, order.numpy(), 1)
        out_scores[rows, :m] = final.numpy()
    return out_ids, out_scores
