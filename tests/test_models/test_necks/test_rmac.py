import pytest
import torch

from irtbox.models.necks import RMACPool, rmac_regions


def test_square_map_regions_by_hand():
    # 6x6, L=2: level 1 one 6x6 region; level 2 side floor(12/3)=4, 2x2 regions at 0 and 2.
    assert rmac_regions(6, 6, levels=2) == [(0, 0, 6), (0, 0, 4), (0, 2, 4), (2, 0, 4), (2, 2, 4)]


def test_wide_map_gets_extra_columns():
    # 4x10: short 4, long 10; m in 1..6 with 1 - (6/m)/4 closest to 0.4 -> m = 3 (overlap 0.5).
    regions = rmac_regions(4, 10, levels=1)
    assert regions == [(0, 0, 4), (0, 2, 4), (0, 4, 4), (0, 6, 4)]


def test_rmac_value_by_hand():
    x = torch.zeros(1, 2, 2, 2)
    x[0, 0, 0, 0] = 3.0   # channel 0 peaks top-left
    x[0, 1, 1, 1] = 4.0   # channel 1 peaks bottom-right
    # L=1 on 2x2: one 2x2 region (== the global one); each max vector (3, 4) normalised to (0.6, 0.8).
    out = RMACPool(levels=1)((x,))
    torch.testing.assert_close(out, torch.tensor([[1.2, 1.6]]), atol=1e-5, rtol=1e-5)
    out = RMACPool(levels=1, include_global=False)((x,))
    torch.testing.assert_close(out, torch.tensor([[0.6, 0.8]]), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('shape', [(7, 7), (5, 9), (12, 6)])
def test_regions_inside_the_map(shape):
    h, w = shape
    for top, left, side in rmac_regions(h, w, levels=3):
        assert 0 <= top and top + side <= h and 0 <= left and left + side <= w
