"""SuperGlobal's poolers equal their equations (paper Eqs. 2-4), computed here directly."""
import numpy as np
import torch

from irtbox.models.necks import Gemp, Relup, Rgem, Sgem
from irtbox.registry import MODELS


def test_rgem_is_half_the_map_plus_windowed_power_means():
    x = torch.rand(2, 3, 6, 7)
    got = Rgem()((x, ))
    xp = np.pad(x.numpy().astype(np.float64), ((0, 0), (0, 0), (2, 2), (2, 2)), mode='reflect')
    ref = np.empty(x.shape)
    for i in range(6):
        for j in range(7):
            ref[:, :, i, j] = (xp[:, :, i:i + 5, j:j + 5] ** 2.5).mean((2, 3)) ** (1 / 2.5)
    np.testing.assert_allclose(got.numpy(), 0.5 * ref + 0.5 * x.numpy(), rtol=1e-5)


def test_gemp_relup_sgem():
    x = torch.rand(2, 4, 3, 3)
    ref = (x.double().clamp(min=1e-8) ** 4.6).mean((2, 3)) ** (1 / 4.6)
    torch.testing.assert_close(Gemp()(x).double(), ref, rtol=1e-5, atol=1e-7)
    assert abs(float(Gemp().gem_power) - 4.6) < 1e-6
    assert Relup()(x - 0.5).min() >= 0.014
    scales = [torch.rand(2, 5) for _ in range(3)]
    unit = [s / s.norm(dim=1, keepdim=True) for s in scales]
    torch.testing.assert_close(Sgem()(scales), torch.maximum(torch.maximum(unit[0], unit[1]),
                                                             unit[2]))
    stack = torch.stack(scales)
    low = stack.amin(dim=(0, 2), keepdim=True)  # each image's own smallest entry
    torch.testing.assert_close(Sgem(infinity=False)(stack),
                               (((stack - low) ** 10).mean(0) ** 0.1 + low)[0])
    # A hand-computed case: scales [0, 1] and [1, 0] of one image, γ = 0.
    pair = [torch.tensor([[0.0, 1.0]]), torch.tensor([[1.0, 0.0]])]
    torch.testing.assert_close(Sgem(infinity=False)(pair), torch.full((1, 2), 0.5 ** 0.1))
    torch.testing.assert_close(Sgem()([torch.tensor([[1.0, 0.0]]), torch.tensor([[0.6, 0.8]])]),
                               torch.tensor([[1.0, 0.8]]))
    # An image's descriptor does not depend on the others of its batch.
    torch.testing.assert_close(Sgem(infinity=False)(stack[:, :1]),
                               Sgem(infinity=False)(stack)[:1])
    neck = torch.nn.Sequential(*[MODELS.build(dict(type=t)) for t in ('Relup', 'Rgem', 'Gemp')])
    assert neck((x, )).shape == (2, 4)
