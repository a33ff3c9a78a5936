"""Adapter to PyTorch Metric Learning (PML) miners (wrapped for the same
reason as the losses, see :mod:`irtbox.models.losses.pml`); the class lookup
and construction are those of :mod:`irtbox.models.pml_adapter`."""
from typing import Tuple

from torch import Tensor, nn

from irtbox.registry import MODELS
from irtbox.utils.errors import with_prefix
from ..pml_adapter import build_pml, pml_class
from ..losses.utils import check_embeddings_labels

__all__ = ['PMLMiner']


@MODELS.register_module()
class PMLMiner(nn.Module):
    """A PyTorch Metric Learning miner, by class name, with PML's defaults.

    The benchmark's default is ``'MultiSimilarityMiner'`` (Wang et al.,
    "Multi-Similarity Loss with General Pair Weighting", CVPR 2019, eq. 5-6):
    with cosine similarity S, a negative pair (i, j) is kept if S_ij + ε > min over the positives of
    i, and a positive pair if S_ij - ε < max over the negatives of i; ε = 0.1.

    Shapes: ``embeddings`` B x D, ``labels`` B -> the PML indices tuple (pair miner: anchor,
    positive, anchor, negative; triplet miner: anchor, positive, negative); no gradient.

    Args:
        name (str): PML miner class name. Defaults to ``'MultiSimilarityMiner'``.
        **kwargs: PML constructor arguments (e.g. ``epsilon``).
    """

    def __init__(self, name: str = 'MultiSimilarityMiner', **kwargs) -> None:
        super().__init__()
        try:
            self.pml_miner = build_pml('miners', pml_class('miners', name, 'BaseMiner'), kwargs)
        except (ImportError, TypeError, ValueError) as err:
            raise with_prefix(err, type(self).__name__) from err
        self.name = name

    def forward(self, embeddings: Tensor, labels: Tensor) -> Tuple[Tensor, ...]:
        try:
            check_embeddings_labels(embeddings, labels)
        except ValueError as err:
            raise ValueError(f'{type(self).__name__}({self.name}): {err}') from err
        return self.pml_miner(embeddings, labels)

    def extra_repr(self) -> str:
        return f'name={self.name!r}'
