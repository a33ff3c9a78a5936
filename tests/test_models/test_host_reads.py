"""What runs at every training or evaluation step reads no tensor value on the host: on a
GPU each read (``bool()``, ``int()``, ``.item()``) waits for the work queued before it."""
import pytest
import torch

from irtbox.models.losses import ArcFaceLoss
from irtbox.models.losses.xbm import CrossBatchMemory
from irtbox.models.necks.pca import PCAReduction
from tests.gpu_semantics import DeviceTensor, host_reads


def test_cross_batch_memory_steps_without_reading_its_counters():
    memory = CrossBatchMemory(size=5, embed_dim=3, start_iter=1)
    with host_reads() as reads:
        for _ in range(4):
            memory.step(torch.randn(2, 3), torch.arange(2))
            memory.get()
    assert reads == []
    assert (int(memory.ptr), int(memory.num_filled), int(memory.num_steps)) == (1, 5, 4)
    # A loaded memory (a resume) reads its counters back from the buffers once.
    loaded = CrossBatchMemory(size=5, embed_dim=3, start_iter=1)
    loaded.load_state_dict(memory.state_dict())
    loaded.step(torch.ones(1, 3), torch.tensor([7]))
    assert int(loaded.ptr) == 2 and int(loaded.num_filled) == 5
    assert loaded.labels[1] == 7 and len(loaded.get()[0]) == 5


def test_a_fitted_projection_projects_without_reading_its_flag():
    pca = PCAReduction(in_dim=4, out_dim=2).eval()
    pca.set_projection(torch.zeros(4), torch.eye(4)[:2])
    with host_reads() as reads:
        pca(torch.randn(3, 4))
    assert reads == []
    other = PCAReduction(in_dim=4, out_dim=2).eval()
    other.load_state_dict(pca.state_dict())  # the flag comes with the buffers
    torch.testing.assert_close(other(torch.ones(1, 4)), torch.ones(1, 2))


def test_gpu_labels_are_range_checked_at_the_first_call_only():
    loss = ArcFaceLoss(num_classes=4, embed_dim=3)
    embeddings = torch.randn(2, 3)
    labels = torch.tensor([0, 3]).as_subclass(DeviceTensor)
    loss(embeddings, labels)
    with host_reads() as reads:
        loss(embeddings, labels)
    assert reads == []
    # On the CPU (no wait) every call is checked.
    with pytest.raises(ValueError, match=r'labels must lie in \[0, 4\)'):
        loss(embeddings, torch.tensor([0, 4]))
