"""Contrastive loss on (query, positive, negatives) tuples (Radenović et al., cnnimageretrieval)."""
import torch.nn.functional as F
from torch import Tensor, nn

from irtbox.registry import MODELS
from irtbox.utils.checks import check_positive_int
from .utils import loss_forward

__all__ = ['TupleContrastiveLoss', 'tuple_contrastive_loss']


def tuple_contrastive_loss(embeddings: Tensor, num_negatives: int = 5, margin: float = 0.85,
                           eps: float = 1e-6) -> Tensor:
    """Sum over tuples of 0.5·d(q, p)² + Σ_n 0.5·max(0, margin − d(q, n))².

    ``embeddings`` is T·(2 + num_negatives) x D, tuple after tuple, each ordered (query, positive,
    negative_1, ..., negative_num_negatives); d(q, x) = ‖q − x + eps‖₂, the ``eps`` as in the
    reference implementation (it keeps the gradient of d finite for identical vectors). Summed over
    the T tuples (the reference code accumulates one backward per tuple).
    """
    size = 2 + num_negatives
    if embeddings.shape[0] % size:
        raise ValueError(f'TupleContrastiveLoss: the batch holds {embeddings.shape[0]} embeddings, '
                         f'not a multiple of the tuple size 2 + num_negatives = {size}')
    tuples = embeddings.reshape(-1, size, embeddings.shape[-1])
    dist = (tuples[:, :1] - tuples[:, 1:] + eps).norm(dim=-1)  # T x (1 + num_negatives)
    positive = 0.5 * dist[:, 0].pow(2)
    negative = 0.5 * F.relu(margin - dist[:, 1:]).pow(2)
    return positive.sum() + negative.sum()


@MODELS.register_module()
class TupleContrastiveLoss(nn.Module):
    """The contrastive loss of the particular-object recipe (Radenović, Tolias &
    Chum, "Fine-tuning CNN Image Retrieval with No Human Annotation", TPAMI 2018).

    For each tuple (query q, positive p, negatives n_1..n_k), with d(q, x) = ‖q − x + 1e-6‖:
    0.5·d(q, p)² + Σ_i 0.5·max(0, β − d(q, n_i))², summed over the tuples of the batch
    (docs/protocols.md, "Hard-negative tuple mining"; IRT uses β = 0.85). The batch must be laid out
    tuple after tuple, each as (query, positive, negatives...), which is what ``SfM120kDataset`` in
    tuple mode with ``tuple_collate`` produces. Labels are not used (the layout carries the targets
    −1, 1, 0, ...).

    Shapes: ``embeddings`` T·(2 + num_negatives) x D (L2-normalised),
    ``labels`` the same length -> scalar.

    Args:
        margin (float): β. Defaults to 0.85.
        num_negatives (int): negatives per tuple. Defaults to 5.
        eps (float): added to the difference before the norm. Defaults to 1e-6.
    """

    def __init__(self, margin: float = 0.85, num_negatives: int = 5, eps: float = 1e-6) -> None:
        super().__init__()
        num_negatives = check_positive_int(num_negatives, f'{type(self).__name__}: num_negatives')
        self.margin, self.num_negatives, self.eps = float(margin), num_negatives, float(eps)

    @loss_forward(min_batch=2)
    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        return tuple_contrastive_loss(embeddings, self.num_negatives, self.margin, self.eps)

    def extra_repr(self) -> str:
        return f'margin={self.margin}, num_negatives={self.num_negatives}'
