"""Online miners: modules called ``miner(embeddings, labels) -> indices tuple``
that pick the pairs or triplets a pair/triplet loss is computed on (see
:class:`irtbox.models.losses.PMLLoss`, which runs its miner itself)."""
from .pml import PMLMiner

__all__ = ['PMLMiner']
