"""KoLeo differential-entropy regulariser (IRT Eq. 5)."""
import torch
from torch import Tensor, nn

from irtbox.registry import MODELS
from .utils import loss_forward

__all__ = ['KoLeoLoss', 'koleo_loss']


def koleo_loss(embeddings: Tensor, eps: float = 1e-8) -> Tensor:
    """IRT Eq. 5: −(1/N) Σ_i log(ρ_i + eps), ρ_i = min_{j≠i} ‖z_i − z_j‖ in the batch.

    The nearest neighbour of each item is chosen without gradient (N x N distances); ρ_i is then
    recomputed differentiably for that pair, so the gradient is that of the min (flowing through the
    nearest pair). ``eps`` keeps the log finite for duplicates (ρ_i = 0, where the norm's gradient
    is 0).

    Args:
        embeddings (Tensor): N x D, N >= 2.
        eps (float): added inside the log. Defaults to 1e-8.

    Returns:
        Tensor: scalar.
    """
    with torch.no_grad():
        dist = torch.cdist(embeddings, embeddings)
        dist.fill_diagonal_(float('inf'))
        nearest = dist.argmin(dim=1)
    rho = (embeddings - embeddings[nearest]).norm(dim=1)
    return -torch.log(rho + eps).mean()


@MODELS.register_module()
class KoLeoLoss(nn.Module):
    """KoLeo loss (Sablayrolles et al. 2019; IRT Eq. 5), weighted by λ in IRT_R.

    Kozachenko–Leonenko entropy estimator up to constants: it grows the distance from each embedding
    to its nearest neighbour in the rank's batch, against dimensional collapse. Labels are unused.

    L = −(1/B) Σ_i log(ρ_i + eps),  ρ_i = min_{j≠i} ‖z_i − z_j‖ (see :func:`koleo_loss`).

    Shapes: ``embeddings`` B x D (B >= 2, L2-normalised), ``labels`` B -> scalar.

    Args:
        eps (float): added to ρ_i inside the log, so duplicates give a large
            finite loss instead of inf. Defaults to 1e-8.
    """

    def __init__(self, eps: float = 1e-8) -> None:
        super().__init__()
        self.eps = float(eps)

    @loss_forward(min_batch=2)
    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        return koleo_loss(embeddings, self.eps)

    def extra_repr(self) -> str:
        return f'eps={self.eps}'
