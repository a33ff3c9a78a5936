"""Hard-negative tuple mining: the pure function against a brute force, and
TupleMiningHook on the SfM-120k fixture (fake runner, real Runner, 2 ranks)."""
import os
import os.path as osp
import pickle
import socket
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.runner import EpochBasedTrainLoop, IterBasedTrainLoop, Runner

from irtbox.datasets import SfM120kDataset
from irtbox.engine.hooks import TupleMiningHook, mine_hard_negatives
from irtbox.registry import MODELS
from irtbox.apis import register_all_modules

register_all_modules()
ROOT = osp.dirname(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))
SFM = osp.join(ROOT, 'tests', 'data', 'landmarks', 'sfm120k')
TINY = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')
PIPELINE = [dict(type='LoadImageFromFile'), dict(type='Resize', scale=(32, 32), keep_ratio=False),
            dict(type='PackRetrievalInputs')]


def brute_force(q, pool, q_clusters, pool_clusters, nnum):
    """Per query: pool sorted by (-similarity, position) in float64, walked one by one."""
    out = []
    for i in range(len(q)):
        sims = [float(np.dot(q[i].astype(np.float64), p.astype(np.float64))) for p in pool]
        chosen, used = [], {q_clusters[i]}
        for j in sorted(range(len(pool)), key=lambda j: (-sims[j], j)):
            if pool_clusters[j] not in used and len(chosen) < nnum:
                chosen.append(j)
                used.add(pool_clusters[j])
        out.append(chosen)
    return np.array(out)


@pytest.fixture
def train_db():
    with open(osp.join(SFM, 'retrieval-SfM-120k.pkl'), 'rb') as f:
        return pickle.load(f)['train']


def random_descriptors(n, dim, rng):
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize('nnum', [1, 3, 5])
def test_mining_matches_brute_force_on_fixture(train_db, nnum):
    rng = np.random.default_rng(nnum)
    clusters = np.asarray(train_db['cluster'])
    desc = random_descriptors(len(clusters), 8, rng)
    queries = np.asarray(train_db['qidxs'])
    pool = rng.permutation(len(clusters))[:24]
    expected = brute_force(desc[queries], desc[pool], clusters[queries], clusters[pool], nnum)
    for chunk in (1, 5, 1000):
        got = mine_hard_negatives(torch.from_numpy(desc[queries]), torch.from_numpy(desc[pool]),
                                  clusters[queries], clusters[pool], nnum, chunk_size=chunk)
        assert got.dtype == np.int64 and got.shape == (len(queries), nnum)
        np.testing.assert_array_equal(got, expected)
    # The invariants, stated directly.
    for i, row in enumerate(got):
        neg_clusters = clusters[pool[row]]
        assert len(set(neg_clusters)) == nnum
        assert clusters[queries[i]] not in neg_clusters
        sims = desc[pool[row]] @ desc[queries[i]]
        assert (np.diff(sims) <= 0).all()
        # Nothing more similar than the last negative was skipped without reason.
        allowed = {clusters[queries[i]], *neg_clusters}
        harder = desc[pool] @ desc[queries[i]] > sims[-1]
        assert {c for c in clusters[pool[harder]]} <= allowed


def test_ties_keep_pool_order():
    q = np.array([[1.0, 0.0]], dtype=np.float32)
    pool = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]], dtype=np.float32)
    got = mine_hard_negatives(q, pool, [0], [1, 2, 3, 4], nnum=3)
    assert got.tolist() == [[1, 2, 3]]
    got = mine_hard_negatives(q, pool, [0], [1, 2, 2, 4], nnum=3)
    assert got.tolist() == [[1, 3, 0]]


def test_too_few_clusters_is_a_clear_error():
    q = random_descriptors(2, 4, np.random.default_rng(0))
    pool = random_descriptors(6, 4, np.random.default_rng(1))
    pool_clusters = [0, 0, 1, 2, 3, 3]  # 4 clusters; 3 besides cluster 0
    assert mine_hard_negatives(q, pool, [5, 0], pool_clusters, nnum=3).shape == (2, 3)
    with pytest.raises(ValueError, match=r'only 3 clusters other than that of query 1 '
                                         r'\(cluster 0\).* 4 negatives'):
        mine_hard_negatives(q, pool, [5, 0], pool_clusters, nnum=4)
    with pytest.raises(ValueError, match='Q x D queries and P x D pool'):
        mine_hard_negatives(q, pool[:, :3], [5, 0], pool_clusters, nnum=1)


# ------------------------------------------------------------------ the hook
def tiny_model(seed=0):
    cfg = Config.fromfile(TINY).model
    torch.manual_seed(seed)
    return MODELS.build(dict(type='ImageRetriever', data_preprocessor=cfg.data_preprocessor,
                             backbone=cfg.backbone, neck=cfg.neck))


def fake_runner(model, dataset, epoch=0, seed=0, loop=EpochBasedTrainLoop, **loader):
    loader = dict(dict(num_workers=0, persistent_workers=False), **loader)
    return SimpleNamespace(model=model, train_loop=loop.__new__(loop), seed=seed, epoch=epoch,
                           train_dataloader=SimpleNamespace(dataset=dataset, **loader))


def current_tuples(dataset):
    """The image indices of every tuple, read through the public item interface."""
    return np.array([[p['data_samples'].sample_idx for p in dataset[t]]
                     for t in range(len(dataset))])


def all_descriptors(model, dataset):
    model.eval()
    with torch.no_grad():
        out = []
        for i in range(dataset.num_images):
            item = dataset.prepare_data(i)
            data = model.data_preprocessor(dict(inputs=[item['inputs']], data_samples=None))
            out.append(model.extract_feat(data['inputs']))
    return torch.cat(out).numpy()


@pytest.mark.slow
def test_hook_mines_the_hardest_tuples_with_the_current_model():
    dataset = SfM120kDataset(data_root=SFM, tuples=True, qsize=10, nnum=4, pipeline=PIPELINE)
    model = tiny_model()
    model.train()
    model.test_scales = (1.0, 0.5)
    # The pool is every image, so the expected negatives are the brute force over all images.
    hook = TupleMiningHook(poolsize=1000, dataloader=dict(batch_size=3))
    hook.before_train_epoch(fake_runner(model, dataset))
    assert model.training and model.test_scales == (1.0, 0.5)

    tuples = current_tuples(dataset)
    pairs = set(zip(dataset.qidxs.tolist(), dataset.pidxs.tolist()))
    assert len({(q, p) for q, p, *_ in tuples.tolist()}) == 10
    assert {(q, p) for q, p, *_ in tuples.tolist()} <= pairs
    model.test_scales = (1.0, )
    desc, clusters = all_descriptors(model, dataset), dataset.clusters
    everything = np.arange(dataset.num_images)
    expected = brute_force(desc[tuples[:, 0]], desc, clusters[tuples[:, 0]], clusters, 4)
    np.testing.assert_array_equal(tuples[:, 2:], everything[expected])


def test_an_unfitted_pca_neck_mines_with_the_full_descriptor_the_loss_trains():
    """IRT ▷128: the PCA is learned after training, so the first epoch mines before any fit,
    by the descriptor the loss sees (the PCA passes it through in training)."""
    def mine(neck):
        dataset = SfM120kDataset(data_root=SFM, tuples=True, qsize=6, nnum=2, pipeline=PIPELINE)
        cfg = Config.fromfile(TINY).model
        torch.manual_seed(0)
        model = MODELS.build(dict(type='ImageRetriever', data_preprocessor=cfg.data_preprocessor,
                                  backbone=cfg.backbone, neck=neck)).train()
        TupleMiningHook(poolsize=12, dataloader=dict(batch_size=8)).before_train_epoch(
            fake_runner(model, dataset))
        return model, current_tuples(dataset)

    reduced, tuples = mine([dict(type='ClsTokenPool'),
                            dict(type='PCAReduction', in_dim=32, out_dim=4)])
    assert reduced.training and not bool(reduced.neck[1].fitted)
    np.testing.assert_array_equal(tuples, mine([dict(type='ClsTokenPool')])[1])
    with torch.no_grad():  # still the neck it was: unfitted, it refuses outside training
        reduced.eval()
        with pytest.raises(RuntimeError, match='PCAReduction is not fitted'):
            reduced.extract_feat(torch.zeros(1, 3, 32, 32))


@pytest.mark.slow
def test_hook_draws_are_seeded_by_seed_and_epoch():
    dataset = SfM120kDataset(data_root=SFM, tuples=True, qsize=6, nnum=2, pipeline=PIPELINE)
    model = tiny_model()
    hook = TupleMiningHook(poolsize=12, dataloader=dict(batch_size=8))

    def mine(epoch, seed):
        hook.before_train_epoch(fake_runner(model, dataset, epoch=epoch, seed=seed))
        return current_tuples(dataset)

    first = mine(0, 0)
    np.testing.assert_array_equal(mine(0, 0), first)
    assert not np.array_equal(mine(1, 0), first)
    assert not np.array_equal(mine(0, 1), first)
    fixed = TupleMiningHook(poolsize=12, dataloader=dict(batch_size=8), seed=0)
    fixed.before_train_epoch(fake_runner(model, dataset, epoch=0, seed=123))
    np.testing.assert_array_equal(current_tuples(dataset), first)


@pytest.mark.slow
def test_hook_setup_errors():
    model = tiny_model()
    tuples = SfM120kDataset(data_root=SFM, tuples=True, qsize=4, nnum=5, pipeline=PIPELINE)
    with pytest.raises(TypeError, match='EpochBasedTrainLoop'):
        TupleMiningHook().before_train_epoch(
            fake_runner(model, tuples, loop=IterBasedTrainLoop))
    with pytest.raises(ValueError, match='persistent_workers=False'):
        TupleMiningHook().before_train_epoch(
            fake_runner(model, tuples, num_workers=2, persistent_workers=True))
    plain = SfM120kDataset(data_root=SFM, pipeline=PIPELINE)
    with pytest.raises(TypeError, match='tuple dataset'):
        TupleMiningHook().before_train_epoch(fake_runner(model, plain))
    # 3 images hold at most 3 clusters: too few for 5 negatives; raised before extracting.
    with pytest.raises(ValueError, match='use a larger pool'):
        TupleMiningHook(poolsize=3).before_train_epoch(fake_runner(model, tuples))
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['shuffle'\]"):
        TupleMiningHook(dataloader=dict(shuffle=True))
    with pytest.raises(ValueError, match='poolsize must be a positive int'):
        TupleMiningHook(poolsize=0)
    with pytest.raises(ValueError, match='^TupleMiningHook: batch_size must be a positive '
                       'integer, got True$'):
        TupleMiningHook(dataloader=dict(batch_size=True))


class _BatchRecorder(Hook):
    """Records, per epoch, the tuples set by the mining and the batches the model saw."""

    priority = 'LOWEST'

    def __init__(self):
        self.tuples, self.batches = [], []

    def before_train_epoch(self, runner):
        self.tuples.append(current_tuples(runner.train_dataloader.dataset))

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        samples = data_batch['data_samples']
        loss = float(torch.as_tensor(outputs['loss']).detach())
        self.batches.append(dict(epoch=runner.epoch, loss=loss,
                                 inputs=len(data_batch['inputs']),
                                 idx=[s.sample_idx for s in samples],
                                 target=[s.tuple_target for s in samples],
                                 tuple_idx=[s.tuple_idx for s in samples]))


@pytest.mark.slow
def test_runner_trains_on_mined_tuples(tmp_path):
    cfg = Config.fromfile(TINY)
    recorder = _BatchRecorder()
    runner = Runner(
        model=dict(cfg.model, head=dict(type='EmbeddingHead', losses=dict(
            contrastive=dict(type='ContrastiveLoss', margin=0.5)))),
        work_dir=str(tmp_path),
        train_dataloader=dict(
            batch_size=2, num_workers=0, sampler=dict(type='DefaultSampler', shuffle=True),
            collate_fn=dict(type='tuple_collate'),
            dataset=dict(type='SfM120kDataset', data_root=SFM, split='train', tuples=True,
                         qsize=4, nnum=3, pipeline=PIPELINE)),
        optim_wrapper=dict(optimizer=dict(type='Adam', lr=1e-4)),
        train_cfg=dict(type='EpochBasedTrainLoop', max_epochs=2),
        custom_hooks=[dict(type='TupleMiningHook', poolsize=20, dataloader=dict(batch_size=8)),
                      recorder],
        default_hooks=dict(checkpoint=None, logger=dict(type='LoggerHook', interval=1)),
        default_scope='irtbox', randomness=dict(seed=0))
    runner.train()
    assert len(recorder.tuples) == 2 and not np.array_equal(*recorder.tuples)
    assert [b['epoch'] for b in recorder.batches] == [0, 0, 1, 1]
    for batch in recorder.batches:
        tuples = recorder.tuples[batch['epoch']]
        assert batch['inputs'] == 10 and np.isfinite(batch['loss'])
        assert batch['target'] == [-1, 1, 0, 0, 0] * 2
        for k in range(2):
            t = batch['tuple_idx'][5 * k]
            assert batch['tuple_idx'][5 * k:5 * k + 5] == [t] * 5
            assert batch['idx'][5 * k:5 * k + 5] == tuples[t].tolist()


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _dist_worker(rank, world, port, out_dir):
    torch.set_num_threads(1)  # no OpenMP thread pool in a forked child
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    torch.distributed.init_process_group('gloo', rank=rank, world_size=world)
    try:
        from mmengine.model import MMDistributedDataParallel
        register_all_modules()
        dataset = SfM120kDataset(data_root=SFM, tuples=True, qsize=7, nnum=3,
                                 pipeline=PIPELINE)
        model = MMDistributedDataParallel(tiny_model(), device_ids=None)
        TupleMiningHook(poolsize=15, dataloader=dict(batch_size=2)).before_train_epoch(
            fake_runner(model, dataset, epoch=3, seed=5))
        np.save(osp.join(out_dir, f'rank{rank}.npy'), current_tuples(dataset))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_two_ranks_agree_with_one_process(tmp_path):
    """Each rank extracts part of the images; both get the single-process tuples."""
    # Forked ranks: a spawned one would import torch and irtbox again (seconds each).
    mp.start_processes(_dist_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True,
                       start_method='fork')
    dataset = SfM120kDataset(data_root=SFM, tuples=True, qsize=7, nnum=3, pipeline=PIPELINE)
    TupleMiningHook(poolsize=15, dataloader=dict(batch_size=5)).before_train_epoch(
        fake_runner(tiny_model(), dataset, epoch=3, seed=5))
    single = current_tuples(dataset)
    for rank in range(2):
        np.testing.assert_array_equal(np.load(tmp_path / f'rank{rank}.npy'), single)
