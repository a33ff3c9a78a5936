import os

import pytest
import torch
import torch.distributed as torch_dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from irtbox.models.losses import ContrastiveLoss, CrossBatchMemory, ScalableNCALoss
from irtbox.models.losses import build_memory, contrastive_loss, pair_loss_with_memory


def entries(start, stop, dim=2):
    """Entries whose label k and embedding (k, -k, ...) identify their position in a stream."""
    labels = torch.arange(start, stop)
    return labels[:, None].float().repeat(1, dim) * torch.tensor([1., -1.])[:dim], labels


def test_fifo_order_and_wrap_around():
    mem = CrossBatchMemory(size=5, embed_dim=2)
    emb, lab = mem.get()
    assert emb.shape == (0, 2) and lab.shape == (0, )
    mem.enqueue(*entries(0, 3))
    assert mem.get()[1].tolist() == [0, 1, 2]
    assert (int(mem.ptr), int(mem.num_filled)) == (3, 3)
    mem.enqueue(*entries(3, 6))  # 5 overwrites the oldest slot (0)
    emb, lab = mem.get()
    assert lab.tolist() == [5, 1, 2, 3, 4]
    assert emb[:, 0].tolist() == [5, 1, 2, 3, 4] and emb[:, 1].tolist() == [-5, -1, -2, -3, -4]
    assert (int(mem.ptr), int(mem.num_filled)) == (1, 5)
    mem.enqueue(*entries(6, 13))  # more than size at once: only the newest 5 stay
    assert sorted(mem.get()[1].tolist()) == [8, 9, 10, 11, 12]
    assert int(mem.ptr) == (1 + 5) % 5


def test_get_returns_copies_so_backward_survives_enqueue():
    loss = ContrastiveLoss(memory_size=4, embed_dim=2)
    z = F.normalize(torch.randn(3, 2), dim=1).requires_grad_()
    y = torch.tensor([0, 0, 1])
    loss(z.detach(), y)
    out = loss(z, y)  # uses the memory, then writes it in place before backward
    out.backward()
    assert z.grad is not None
    emb, _ = loss.memory.get()
    emb += 1
    assert not torch.equal(loss.memory.get()[0], emb)


def test_current_batch_is_not_its_own_positive():
    z = F.normalize(torch.randn(6, 3, generator=torch.Generator().manual_seed(0)), dim=1)
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    loss = ContrastiveLoss(margin=0.1, memory_size=20, embed_dim=3)
    assert loss(z, y).item() == pytest.approx(contrastive_loss(z, y, 0.1).item())
    # second call with the same batch: the memory now holds it, as extra entries
    assert loss(z, y).item() == pytest.approx(contrastive_loss(z, y, 0.1, z, y).item())


def test_memory_embeddings_are_enqueued_instead_of_embeddings():
    loss = ScalableNCALoss(memory_size=4, embed_dim=2)
    z = torch.tensor([[1., 0.], [0., 1.]], requires_grad=True)
    keys = torch.tensor([[0.6, 0.8], [-0.8, 0.6]])
    loss(z, torch.tensor([3, 4]), memory_embeddings=keys)
    emb, lab = loss.memory.get()
    assert torch.equal(emb, keys) and lab.tolist() == [3, 4]
    with pytest.raises(ValueError, match='memory_embeddings must have the shape'):
        loss(z, torch.tensor([3, 4]), memory_embeddings=keys[:1])


def test_memory_follows_the_embedding_dtype_and_gradcheck():
    g = torch.Generator().manual_seed(2)
    loss = ContrastiveLoss(margin=0.1, memory_size=6, embed_dim=3)
    loss(F.normalize(torch.randn(4, 3, generator=g), dim=1), torch.tensor([0, 1, 2, 0]))
    loss.eval()  # gradcheck calls forward many times: keep the memory fixed
    raw = torch.randn(5, 3, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 0, 1, 2, 3])
    assert torch.autograd.gradcheck(lambda x: loss(F.normalize(x, dim=1), y), (raw, ))


def test_eval_mode_reads_but_does_not_fill():
    loss = ContrastiveLoss(memory_size=4, embed_dim=2)
    z, y = torch.tensor([[1., 0.], [0., 1.]]), torch.tensor([0, 1])
    loss(z, y)
    loss.eval()
    # vs stored z0 (label 0, s = 0): positive, 1; vs z1 (label 1, s = 1): negative, 1 - 0.5
    assert loss(torch.tensor([[0., 1.]]), torch.tensor([0])).item() == pytest.approx(1.5)
    assert int(loss.memory.num_filled) == 2 and int(loss.memory.num_steps) == 1


def test_warm_up():
    loss = ContrastiveLoss(memory_size=8, embed_dim=2, memory_start_iter=2)
    z, y = torch.tensor([[1., 0.], [0., 1.]]), torch.tensor([0, 1])
    for _ in range(2):
        loss(z, y)
        assert loss.memory.get()[0].shape == (0, 2) and int(loss.memory.num_filled) == 0
    loss(z, y)  # first call after warm-up: reads the (empty) memory, then fills it
    assert int(loss.memory.num_filled) == 2
    loss(z, y)
    assert int(loss.memory.num_filled) == 4 and int(loss.memory.num_steps) == 4


def test_state_dict_round_trip_resumes_memory():
    g = torch.Generator().manual_seed(1)
    kwargs = dict(margin=0.3, memory_size=7, embed_dim=4, memory_start_iter=1)
    loss = ContrastiveLoss(**kwargs)
    for _ in range(4):  # 3 enqueues of 3 -> wrapped around
        loss(F.normalize(torch.randn(3, 4, generator=g), dim=1), torch.randint(0, 3, (3, ),
                                                                                generator=g))
    state = loss.state_dict()
    assert set(state) == {'memory.embeddings', 'memory.labels', 'memory.ptr',
                          'memory.num_filled', 'memory.num_steps'}
    resumed = ContrastiveLoss(**kwargs)
    resumed.load_state_dict(state)
    for key, value in resumed.state_dict().items():
        assert torch.equal(value, state[key]), key
    z, y = F.normalize(torch.randn(3, 4, generator=g), dim=1), torch.tensor([0, 1, 2])
    assert resumed(z, y).item() == pytest.approx(loss(z, y).item())
    with pytest.raises(RuntimeError, match='size mismatch'):
        ContrastiveLoss(margin=0.3, memory_size=9, embed_dim=4).load_state_dict(state)


def test_any_pair_loss_composes_with_a_memory():
    """pair_loss_with_memory gives any pair loss the batch plus the memory's
    entries (read before the batch is enqueued), and enqueues afterwards."""
    calls = []

    def pair_loss(embeddings, labels, ref_embeddings=None, ref_labels=None):
        calls.append(None if ref_labels is None else ref_labels.tolist())
        return embeddings.sum()

    z, y = torch.tensor([[1., 0.], [0., 1.]]), torch.tensor([0, 1])
    assert pair_loss_with_memory(pair_loss, None, z, y).item() == 2
    memory = build_memory(memory_size=3, embed_dim=2)
    pair_loss_with_memory(pair_loss, memory, z, y)
    pair_loss_with_memory(pair_loss, memory, z, y + 5)
    memory.eval()
    pair_loss_with_memory(pair_loss, memory, z, y + 7)
    assert calls == [None, [], [0, 1], [6, 1, 5]]
    with pytest.raises(ValueError, match='^memory_embeddings were given but memory_size=0'):
        pair_loss_with_memory(pair_loss, None, z, y, memory_embeddings=z)
    with pytest.raises(ValueError, match='^embed_dim=2 but the embeddings have dimension 3'):
        pair_loss_with_memory(pair_loss, memory, torch.zeros(2, 3), y)


def test_memory_config_keys():
    assert build_memory(0) is None
    with pytest.raises(ValueError, match='^memory_size=4 needs embed_dim'):
        build_memory(4)
    with pytest.raises(ValueError, match=r'^ContrastiveLoss: memory_size must be a non-negative '
                                         r'integer, got -1$'):
        ContrastiveLoss(memory_size=-1)
    assert ContrastiveLoss().memory is None and ScalableNCALoss().memory is None
    assert ContrastiveLoss.uses_memory and ScalableNCALoss.uses_memory


def test_bad_arguments():
    with pytest.raises(ValueError,
                       match='^CrossBatchMemory: size must be a positive integer, got 0$'):
        CrossBatchMemory(size=0, embed_dim=2)
    with pytest.raises(ValueError, match='^CrossBatchMemory: start_iter must be a non-negative '
                                         'integer, got -1$'):
        CrossBatchMemory(size=2, embed_dim=2, start_iter=-1)
    with pytest.raises(ValueError, match='B x 2'):
        CrossBatchMemory(size=2, embed_dim=2).enqueue(torch.zeros(1, 3), torch.zeros(1))


def _distributed_worker(rank, world_size, init_file, out_dir):
    torch.set_num_threads(1)  # no OpenMP thread pool in a forked child
    torch_dist.init_process_group('gloo', init_method=f'file://{init_file}', rank=rank,
                                  world_size=world_size)
    try:
        # ranks hold batches of different sizes: 2 on rank 0, 3 on rank 1
        mem = CrossBatchMemory(size=6, embed_dim=2)
        mem.enqueue(*(entries(0, 2) if rank == 0 else entries(10, 13)))
        loss = ContrastiveLoss(margin=0.5, memory_size=5, embed_dim=2)
        z = F.normalize(torch.randn(2, 2, generator=torch.Generator().manual_seed(rank)), dim=1)
        loss(z, torch.tensor([rank, rank]))
        second = loss(z, torch.tensor([rank, rank]))
        torch.save(dict(memory=mem.state_dict(), loss=loss.state_dict(), z=z,
                        second=second.detach()), os.path.join(out_dir, f'{rank}.pth'))
    finally:
        torch_dist.destroy_process_group()


@pytest.mark.slow
def test_all_gather_across_two_gloo_ranks(tmp_path):
    # Two tiny CPU processes (gloo). Forked rather than spawned: a spawned child
    # re-imports torch and mmengine (~10 s on 2 cores), a forked one starts at once.
    mp.start_processes(_distributed_worker, args=(2, str(tmp_path / 'init'), str(tmp_path)),
                       nprocs=2, start_method='fork')
    r0, r1 = (torch.load(tmp_path / f'{r}.pth') for r in range(2))
    for key in r0['memory']:
        assert torch.equal(r0['memory'][key], r1['memory'][key]), key
    assert r0['memory']['labels'].tolist()[:5] == [0, 1, 10, 11, 12]
    assert r0['memory']['embeddings'][:5, 0].tolist() == [0, 1, 10, 11, 12]
    # contrastive memory holds both ranks' first batches, rank 0 first, then wrapped by
    # the second call (4 entries into a queue of 5)
    for key in r0['loss']:
        assert torch.equal(r0['loss'][key], r1['loss'][key]), key
    # slots: first call [0, 0, 1, 1, -], second call writes slots 4, 0, 1, 2
    assert r0['loss']['memory.labels'].tolist() == [0, 1, 1, 1, 0]
    # each rank's second loss compared its batch with the gathered first batches
    all_z = torch.cat([r0['z'], r1['z']])
    all_y = torch.tensor([0, 0, 1, 1])
    for rank, res in enumerate((r0, r1)):
        y = torch.tensor([rank, rank])
        expected = contrastive_loss(res['z'], y, 0.5, all_z, all_y)
        assert res['second'].item() == pytest.approx(expected.item(), rel=1e-6)
