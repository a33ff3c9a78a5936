"""What runs at every training or evaluation step reads no tensor value on the host: on a
GPU each read (``bool()``, ``int()``, ``.item()``) waits for the work queued before it."""
import pytest
import torch

from irtbox.models.losses import ArcFaceLoss
from irtbox.models.losses.utils import check_label_range
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


def test_gpu_labels_are_range_checked_at_every_call_without_a_read():
    """On a GPU a read of the labels waits for it: the first call reads them (a wrong
    num_classes fails at once), later calls check them on the device and see the outcome at a
    later call, never waiting (issue 47: they went unchecked after the first call, so a bad
    label later on trained on silently, e.g. as a negative of every class under Partial FC)."""
    loss = ArcFaceLoss(num_classes=4, embed_dim=3)
    embeddings = torch.randn(2, 3)
    labels = torch.tensor([0, 3]).as_subclass(DeviceTensor)
    loss(embeddings, labels)
    with host_reads() as reads:
        loss(embeddings, labels)
        loss(embeddings, labels)
    assert reads == []

    def on_gpu(*values):
        return torch.tensor(values).as_subclass(DeviceTensor)

    module = torch.nn.Module()
    check_label_range(module, on_gpu(0, 1), 4, 'Loss')
    with host_reads() as reads:
        check_label_range(module, on_gpu(1, 2), 4, 'Loss')
        check_label_range(module, on_gpu(0, 4), 4, 'Loss')  # seen at a later call
        with pytest.raises(ValueError, match=r'^Loss: labels must lie in \[0, 4\) .*got labels '
                           r'in \[0, 4\]'):
            check_label_range(module, on_gpu(2, 3), 4, 'Loss')
    assert reads == []
    # On the CPU (no wait) every call is checked, at once.
    with pytest.raises(ValueError, match=r'labels must lie in \[0, 4\)'):
        loss(embeddings, torch.tensor([0, 4]))


@pytest.mark.gpu
def test_gpu_labels_are_range_checked_without_a_sync_on_a_gpu():
    """The real path of the test above: after the first call, no call synchronizes (CUDA's
    sync debug mode raises at one), and a bad label is reported at a later call."""
    module = torch.nn.Module()
    first, good, bad = (torch.tensor(v, device='cuda') for v in ([0, 1], [1, 2], [0, 4]))
    check_label_range(module, first, 4, 'Loss')
    torch.cuda.set_sync_debug_mode('error')
    try:
        for labels in (good, bad):
            check_label_range(module, labels, 4, 'Loss')
    finally:
        torch.cuda.set_sync_debug_mode('default')
    torch.cuda.synchronize()  # the copy is done: the next call sees it
    with pytest.raises(ValueError, match=r'got labels in \[0, 4\]'):
        check_label_range(module, torch.tensor([2, 3], device='cuda'), 4, 'Loss')
