import torch

from irtbox.structures import ViTFeatures


def test_fields_shapes_and_token_round_trip():
    tokens = torch.randn(2, 2 + 3 * 4, 5)
    feats = ViTFeatures.from_tokens(tokens, num_prefix=2, height=3, width=4)
    assert feats.prefix.shape == (2, 2, 5) and feats.grid.shape == (2, 5, 3, 4)
    torch.testing.assert_close(feats.prefix, tokens[:, :2])
    # row-major token order: token 2 + r * 4 + c is grid position (r, c)
    torch.testing.assert_close(feats.grid[:, :, 1, 2], tokens[:, 2 + 1 * 4 + 2])
    torch.testing.assert_close(feats.tokens(), tokens)
    prefix, grid = feats  # still unpacks as a pair
    assert prefix is feats.prefix and grid is feats.grid


def test_no_prefix_tokens():
    feats = ViTFeatures.from_tokens(torch.randn(1, 6, 3), num_prefix=0, height=2, width=3)
    assert feats.prefix.shape == (1, 0, 3) and feats.grid.shape == (1, 3, 2, 3)
