"""Partial FC: the sharded, sampled class-centre layer, against independent single-process
computations (the replicated losses on the whole matrix, or on the sampled rows)."""
import math
import os
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as torch_dist
import torch.multiprocessing as mp
from mmengine.optim import OptimWrapper
from torch import nn

from irtbox.engine.hooks.partial_fc import PartialFCHook
from irtbox.models.losses import (ArcFaceLoss, CosFaceLoss, NormalizedSoftmaxLoss, arcface_loss,
                                  cosface_loss, normalized_softmax_loss)
from irtbox.models.losses.partial_fc import (init_shard, sample_classes, shard_range,
                                             step_generator, whole_state_dict)
from tests.shared_runs import forkserver

C, D, SEED = 23, 6, 7
# name -> (class, constructor arguments, the replicated formula on (x, y, W))
CASES = {
    'arcface': (ArcFaceLoss, dict(margin=0.5, scale=30.0),
                lambda x, y, w: arcface_loss(x, y, w, 0.5, 30.0)),
    'arcface_easy': (ArcFaceLoss, dict(margin=0.5, scale=30.0, easy_margin=True),
                     lambda x, y, w: arcface_loss(x, y, w, 0.5, 30.0, True)),
    # a margin large enough that some targets take the θ + m > π fallback
    'arcface_wide': (ArcFaceLoss, dict(margin=1.4, scale=16.0),
                     lambda x, y, w: arcface_loss(x, y, w, 1.4, 16.0)),
    'cosface': (CosFaceLoss, dict(margin=0.35, scale=30.0),
                lambda x, y, w: cosface_loss(x, y, w, 0.35, 30.0)),
    'nsoftmax': (NormalizedSoftmaxLoss, dict(temperature=0.1),
                 lambda x, y, w: normalized_softmax_loss(x, y, w, 0.1)),
}
SIZES = {1: [12], 2: [5, 7], 4: [3, 3, 2, 4]}  # one global batch of 12, split unevenly
RATE = 0.3  # sampled: ceil(0.3 * 23) = 7 classes, more when the batch has more labels
TRAIN_STEPS = 3


def global_batch(step=0):
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randn(12, D, generator=g, dtype=torch.float64)
    y = torch.randint(0, C, (12, ), generator=g)
    y[:3] = y[3]  # a repeated label
    return x, y


def full_weights():
    return torch.randn(C, D, generator=torch.Generator().manual_seed(5), dtype=torch.float64)


def local_part(t, world, rank):
    start = sum(SIZES[world][:rank])
    return t[start:start + SIZES[world][rank]]


def remap(y, sample):
    """Labels as positions in the sorted sample (the reference's class indices)."""
    return torch.searchsorted(sample, y)


def build(name, sample_rate):
    cls, kwargs, _ = CASES[name]
    layer = cls(C, D, partial_fc=dict(sample_rate=sample_rate, seed=SEED), **kwargs).double()
    layer.load_state_dict({'class_weights': full_weights()})  # keeps this rank's rows
    return layer


def fake_runner(layer, lr=0.1):
    model = nn.Module()
    model.head = nn.Module()
    model.head.loss = layer
    optimizer = torch.optim.SGD([layer.class_weights], lr=lr, momentum=0.9, weight_decay=1e-3)
    return SimpleNamespace(model=model, optim_wrapper=OptimWrapper(optimizer), iter=0)


def train_steps(runner, world, rank, steps):
    hook, layer = PartialFCHook(), runner.model.head.loss
    for step in steps:
        runner.iter = step
        hook.before_train_iter(runner, step)
        x, y = global_batch(step)
        runner.optim_wrapper.update_params(layer(local_part(x, world, rank),
                                                 local_part(y, world, rank)))


def save_checkpoint(runner, path):
    """As IrtboxRunner.save_checkpoint: prepare on every rank, rank 0 writes."""
    hook = PartialFCHook()
    hook.prepare_checkpoint(runner)
    if torch_dist.get_rank() == 0:
        checkpoint = dict(state_dict=runner.model.state_dict(),
                          optimizer=runner.optim_wrapper.state_dict())
        hook.before_save_checkpoint(runner, checkpoint)
        torch.save(checkpoint, path)


def load_checkpoint(runner, path):
    """As IrtboxRunner.resume: the hook, then the weights, then the optimizer state."""
    checkpoint = torch.load(path)
    PartialFCHook().after_load_checkpoint(runner, checkpoint)
    runner.model.load_state_dict(checkpoint['state_dict'])
    runner.optim_wrapper.load_state_dict(checkpoint['optimizer'])


def _worker(rank, world, init_file, out_dir, resume_from):
    torch.set_num_threads(1)  # no OpenMP thread pool in a forked child
    torch_dist.init_process_group('gloo', init_method=f'file://{init_file}', rank=rank,
                                  world_size=world)
    try:
        out = {}
        x, y = global_batch()
        for name in CASES:
            for rate in (1.0, RATE):
                layer = build(name, rate)
                x_local = local_part(x, world, rank).clone().requires_grad_()
                loss = layer(x_local, local_part(y, world, rank))
                loss.backward()
                out[name, rate] = dict(loss=loss.detach(), grad_x=x_local.grad,
                                       grad_w=layer.class_weights.grad,
                                       start=layer.shard_start)
        # every label in rank 0's rows, the sample = the labels: the others have no column
        layer = build('arcface', 0.01)
        x_local = local_part(x, world, rank).clone().requires_grad_()
        loss = layer(x_local, local_part(y % 5, world, rank))
        loss.backward()
        out['empty'] = dict(loss=loss.detach(), grad_x=x_local.grad,
                            grad_w=layer.class_weights.grad)
        torch.manual_seed(rank)  # ranks whose generators differ agree on rank 0's seed
        unseeded = ArcFaceLoss(C, D, partial_fc=dict(sample_rate=0.5)).double()
        unseeded(local_part(x, world, rank), local_part(y, world, rank))
        out['agreed_seed'] = unseeded.seed
        out['samples'] = [sample_classes(y, C, RATE, step_generator(SEED, s, c))
                          for s in (0, 1) for c in (0, 1)]
        # training, checkpoint gathered on rank 0, resumed at another world size
        runner = fake_runner(build('arcface', 0.5))
        if resume_from is None:
            train_steps(runner, world, rank, range(TRAIN_STEPS))
        else:
            load_checkpoint(runner, resume_from)
            train_steps(runner, world, rank, [TRAIN_STEPS])
        out['shard_after_load'] = runner.model.head.loss.class_weights.detach().clone()
        out['whole'] = whole_state_dict(runner.model)['head.loss.class_weights']
        save_checkpoint(runner, os.path.join(out_dir, f'ckpt_world{world}.pth'))
        torch.save(out, os.path.join(out_dir, f'world{world}_rank{rank}.pth'))
    finally:
        torch_dist.destroy_process_group()


def run_world(tmp_path, world, resume_from=None):
    # Ranks forked from a fork server that has imported this module (torch, irtbox) once: a
    # fork of the test process itself fails after it has run a backward pass ("autograd's
    # threading ... fork"), a spawned rank imports everything again.
    mp.start_processes(_worker, args=(world, str(tmp_path / f'init{world}'), str(tmp_path),
                                      resume_from), nprocs=world, start_method=forkserver(__name__))
    return [torch.load(tmp_path / f'world{world}_rank{r}.pth') for r in range(world)]


def reference(name, rate, step=0):
    """The replicated formula on the whole global batch: on the sampled rows of W with
    the labels renumbered, when sampling."""
    x, y = global_batch(step)
    x = x.clone().requires_grad_()
    w = full_weights().requires_grad_()
    if rate < 1:
        sample = sample_classes(y, C, rate, step_generator(SEED, step, 0))
        loss = CASES[name][2](x, remap(y, sample), w[sample])
    else:
        loss = CASES[name][2](x, y, w)
    loss.backward()
    return loss.detach(), x.grad, w.grad


def reference_training(steps, rate=0.5, lr=0.1):
    """SGD (momentum, weight decay) on the whole matrix, each step's loss on its sample."""
    w = nn.Parameter(full_weights())
    optimizer = torch.optim.SGD([w], lr=lr, momentum=0.9, weight_decay=1e-3)
    for step in range(steps):
        x, y = global_batch(step)
        sample = sample_classes(y, C, rate, step_generator(SEED, step, 0))
        arcface_loss(x, remap(y, sample), w[sample], 0.5, 30.0).backward()
        optimizer.step()
        optimizer.zero_grad()
    return w.detach(), optimizer.state[w]['momentum_buffer']


@pytest.fixture(scope='module')
def distributed(tmp_path_factory):
    """Runs at 4 gloo ranks (training 3 steps, checkpoint), then 2 (resuming it for one
    step); one forked process per rank."""
    tmp = tmp_path_factory.mktemp('partial_fc')
    four = run_world(tmp, 4)
    two = run_world(tmp, 2, resume_from=str(tmp / 'ckpt_world4.pth'))
    return tmp, {4: four, 2: two}


@pytest.mark.slow
@pytest.mark.parametrize('world', [2, 4])
@pytest.mark.parametrize('name', list(CASES))
@pytest.mark.parametrize('rate', [1.0, RATE])
def test_sharded_loss_and_gradients_equal_single_process(distributed, world, name, rate):
    _, runs = distributed
    loss, grad_x, grad_w = reference(name, rate)
    for rank, out in enumerate(runs[world]):
        got = out[name, rate]
        torch.testing.assert_close(got['loss'], loss, rtol=1e-10, atol=0)  # every rank
        # each rank's embedding gradient is world x the global one (DDP then averages)
        torch.testing.assert_close(got['grad_x'] / world, local_part(grad_x, world, rank),
                                   rtol=0, atol=1e-10)
        start, stop = shard_range(C, world, rank)
        assert got['start'] == start
        torch.testing.assert_close(got['grad_w'], grad_w[start:stop], rtol=0, atol=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize('world', [2, 4])
def test_ranks_without_a_sampled_class(distributed, world):
    _, runs = distributed
    x, y = global_batch()
    x = x.clone().requires_grad_()
    w = full_weights().requires_grad_()
    sample = torch.unique(y % 5)  # 1% of 23 classes: the labels alone
    loss = CASES['arcface'][2](x, remap(y % 5, sample), w[sample])
    loss.backward()
    for rank, out in enumerate(runs[world]):
        got = out['empty']
        torch.testing.assert_close(got['loss'], loss.detach(), rtol=1e-10, atol=0)
        torch.testing.assert_close(got['grad_x'] / world, local_part(x.grad, world, rank),
                                   rtol=0, atol=1e-10)
        start, stop = shard_range(C, world, rank)
        torch.testing.assert_close(got['grad_w'], w.grad[start:stop], rtol=0, atol=1e-10)
        if start >= 5:
            assert not got['grad_w'].any()


@pytest.mark.slow
def test_one_process_layer_equals_replicated_loss():
    x, y = global_batch()
    for name in CASES:
        for rate in (1.0, RATE):
            layer = build(name, rate)
            x_ = x.clone().requires_grad_()
            loss = layer(x_, y)
            loss.backward()
            expected, grad_x, grad_w = reference(name, rate)
            torch.testing.assert_close(loss.detach(), expected, rtol=1e-12, atol=0)
            torch.testing.assert_close(x_.grad, grad_x, rtol=0, atol=1e-12)
            torch.testing.assert_close(layer.class_weights.grad, grad_w, rtol=0, atol=1e-12)


def test_sample_holds_every_positive_and_the_right_count():
    g = torch.Generator().manual_seed(0)
    for num_classes, rate in ((1000, 0.1), (1000, 0.013), (50, 0.5), (10, 0.05)):
        labels = torch.randint(0, num_classes, (64, ), generator=g)
        positives = set(labels.tolist())
        expected = min(num_classes, max(len(positives), math.ceil(rate * num_classes)))
        sample = sample_classes(labels, num_classes, rate, step_generator(1, 2, 0))
        if expected == num_classes:
            assert sample is None
            continue
        assert len(sample) == expected == len(set(sample.tolist()))
        assert positives <= set(sample.tolist())
        assert sample.tolist() == sorted(sample.tolist())
        assert 0 <= int(sample.min()) and int(sample.max()) < num_classes


@pytest.mark.slow
def test_sample_is_seeded_per_step_and_the_same_on_every_rank(distributed):
    _, runs = distributed
    _, y = global_batch()
    ours = [sample_classes(y, C, RATE, step_generator(SEED, s, c)) for s in (0, 1) for c in (0, 1)]
    for world in (2, 4):
        for out in runs[world]:
            for got, expected in zip(out['samples'], ours):
                assert torch.equal(got, expected)
    # another step, or another call within one, draws another sample (100 of 1000 classes);
    # the same seed and step draw the same sample again
    y = torch.arange(0, 1000, 50)
    draws = [sample_classes(y, 1000, 0.1, step_generator(SEED, s, c)) for s in (0, 1)
             for c in (0, 1)]
    assert len({tuple(s.tolist()) for s in draws}) == 4
    assert torch.equal(sample_classes(y, 1000, 0.1, step_generator(SEED, 0, 0)), draws[0])
    assert not torch.equal(sample_classes(y, 1000, 0.1, step_generator(SEED + 1, 0, 0)),
                           draws[0])


@pytest.mark.slow
def test_ranks_without_a_seed_use_rank_0s(distributed):
    _, runs = distributed
    torch.manual_seed(0)
    expected = int(torch.randint(2**62, ()))
    for world in (2, 4):
        assert [out['agreed_seed'] for out in runs[world]] == [expected] * world


@pytest.mark.slow
def test_checkpoint_holds_the_whole_matrix_and_resumes_at_any_world_size(distributed):
    tmp, runs = distributed
    weights, momentum = reference_training(TRAIN_STEPS)
    key = 'head.loss.class_weights'
    saved = torch.load(tmp / 'ckpt_world4.pth')
    torch.testing.assert_close(saved['state_dict'][key], weights, rtol=0, atol=1e-12)
    torch.testing.assert_close(saved['optimizer']['state'][0]['momentum_buffer'], momentum,
                               rtol=0, atol=1e-12)
    # resumed at 2 ranks: each took its rows, and one more step matches
    for rank, out in enumerate(runs[2]):
        start, stop = shard_range(C, 2, rank)
        assert out['shard_after_load'].shape == (stop - start, D)
    # every rank sees the whole matrix in whole_state_dict (the rehearsal's digests)
    for out in runs[4]:
        torch.testing.assert_close(out['whole'], weights, rtol=0, atol=1e-12)
    weights4, momentum4 = reference_training(TRAIN_STEPS + 1)
    saved2 = torch.load(tmp / 'ckpt_world2.pth')
    torch.testing.assert_close(saved2['state_dict'][key], weights4, rtol=0, atol=1e-12)
    torch.testing.assert_close(saved2['optimizer']['state'][0]['momentum_buffer'], momentum4,
                               rtol=0, atol=1e-12)
    # resumed at 1 process (no process group) from the 4-rank checkpoint
    runner = fake_runner(build('arcface', 0.5))
    load_checkpoint(runner, str(tmp / 'ckpt_world4.pth'))
    train_steps(runner, 1, 0, [TRAIN_STEPS])
    torch.testing.assert_close(runner.model.head.loss.class_weights.detach(), weights4,
                               rtol=0, atol=1e-12)


def test_initial_matrix_is_the_same_for_every_world_size():
    whole = init_shard(0, 10000, 3, seed=11)  # three init blocks
    for world in (2, 3, 7):
        parts = [init_shard(*shard_range(10000, world, r), 3, seed=11) for r in range(world)]
        assert torch.equal(torch.cat(parts), whole)
    assert float(whole.abs().max()) <= 1 / math.sqrt(3)
    assert not torch.equal(init_shard(0, 10000, 3, seed=12), whole)
    # the rows of two blocks are not copies of each other
    assert not torch.equal(whole[:4096], whole[4096:8192])


def test_shard_range_splits_like_tensor_split():
    for num_classes, world in ((23, 4), (8, 2), (5, 5), (81313, 8)):
        parts = torch.arange(num_classes).tensor_split(world)
        for rank, part in enumerate(parts):
            assert shard_range(num_classes, world, rank) == (int(part[0]), int(part[-1]) + 1)


@pytest.mark.parametrize('value, message', [
    (0.1, r'partial_fc must be a dict such as dict\(sample_rate=0.1\) or None, got 0.1'),
    (dict(sample_rate=0), r'partial_fc.sample_rate must be a number in \(0, 1\]'),
    (dict(sample_rate=1.5), r'partial_fc.sample_rate must be a number in \(0, 1\]'),
    (dict(sample_rate=True), r'partial_fc.sample_rate must be a number in \(0, 1\]'),
    (dict(sample_rat=0.1), r"partial_fc has unknown key\(s\) \['sample_rat'\]"),
    (dict(seed=-1), 'partial_fc.seed must be None or a non-negative integer, got -1'),
])
def test_bad_partial_fc_is_named(value, message):
    for cls in (ArcFaceLoss, CosFaceLoss, NormalizedSoftmaxLoss):
        with pytest.raises(ValueError, match=f'^{cls.__name__}: {message}'):
            cls(10, 4, partial_fc=value)


def test_unsharded_layers_are_unchanged_and_labels_checked():
    layer = ArcFaceLoss(10, 4, partial_fc=dict(sample_rate=0.5))
    assert layer.class_weights.shape == (10, 4) and layer.shard_start == 0
    assert 'partial_fc=dict(sample_rate=0.5' in repr(layer)
    with pytest.raises(ValueError, match=r'labels must lie in \[0, 10\)'):
        layer(torch.randn(2, 4), torch.tensor([0, 10]))
    assert not hasattr(ArcFaceLoss(10, 4), 'shard_start')
