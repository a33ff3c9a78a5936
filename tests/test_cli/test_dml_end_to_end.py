"""The training-recipe benchmark end to end on the CUB fixture: tools/train.py with a shipped
config (validation every "epoch", early stopping on Precision@1, best weights saved), then
tools/test.py on best.pth, whose MAP@R and Precision@1 are recomputed by brute force from the
saved embeddings.

The configs run as shipped except for what a CPU test needs: the fixture, the configs' DINOv2
ViT-B/14 architecture cut to one block at 28 x 28 (2 x 2 patches) with random weights and layer
scale 1, batches of 8 (M = 2), an "epoch" of 2 iterations, patience 1, a checkpoint every 2
iterations; and the output-dimension factor's keys at d = 2, because the fixture's classes are
so easy that any wider random embedding retrieves them perfectly, which would make the
brute-force check of MAP@R trivially 1.
"""
import glob
import json
import os.path as osp

import numpy as np
import pytest

from irtbox.utils.checkpoint import safe_torch_load
from irtbox.cli import test as test_tool
from irtbox.cli import train as train_tool

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
DML = osp.join(ROOT, 'configs', 'dml_benchmark')
FIXTURE = 'tests/data/cub'
CONFIGS = {loss: osp.join(DML, f'dml_dinov2-vit-b_{loss}_1xb256-39k_cub.py')
           for loss in ('arcface', 'multisimilarity')}
MODEL_LR, CLASSIFIER_LR = 1e-6, 1.0  # the paper's
DIM = 2
VAL_INTERVAL, MAX_ITERS = 2, 8


def fixture_classes():
    """(training-part classes, validation classes, test labels) of the CUB fixture, from its
    files: classes 1-100 are CUB's training split, whose first 80% of sorted ids train."""
    with open(osp.join(ROOT, FIXTURE, 'image_class_labels.txt')) as f:
        labels = np.array([int(line.split()[1]) for line in f if line.strip()])
    train = np.unique(labels[labels <= 100])
    cut = len(train) - int(round(0.2 * len(train)))
    return train[:cut], train[cut:], labels[labels > 100]


def common_options():
    opts = ['train_dataloader.dataset.dataset.data_root=' + FIXTURE,
            'val_dataloader.dataset.dataset.data_root=' + FIXTURE,
            'test_dataloader.dataset.data_root=' + FIXTURE,
            'model.backbone.pretrained=False', 'model.backbone.depth=1',
            'model.backbone.img_size=28',
            # Layer scale 1: DINOv2's 1e-5 makes a random one-block model's CLS token (nearly)
            # the same for every image, and the test's rankings tie.
            'model.backbone.init_values=1.0',
            f'model.neck.1.out_dim={DIM}', f'model.head.losses.metric.embedding_size={DIM}']
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        opts += [f'{loader}.dataset.pipeline.1.scale=(28,28)', f'{loader}.num_workers=0',
                 f'{loader}.persistent_workers=False']
    return opts


def train_options(loss):
    opts = common_options() + [
        'train_dataloader.batch_size=8', 'train_dataloader.sampler.batch_size=8',
        'train_dataloader.sampler.m=2', f'train_cfg.val_interval={VAL_INTERVAL}',
        f'train_cfg.max_iters={MAX_ITERS}', 'custom_hooks.0.patience=1',
        f'default_hooks.checkpoint.interval={VAL_INTERVAL}']
    if loss == 'arcface':
        opts.append(f'model.head.losses.metric.num_classes={len(fixture_classes()[0])}')
    return opts


@pytest.fixture(scope='module', params=sorted(CONFIGS))
def trained(request, tmp_path_factory):
    loss = request.param
    work_dir = str(tmp_path_factory.mktemp(loss))
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)  # the fixture's relative data root
        train_tool.main([CONFIGS[loss], '--work-dir', work_dir,
                         '--cfg-options', *train_options(loss)])
    return loss, work_dir


@pytest.mark.slow
def test_early_stopping_keeps_the_best(trained):
    """One validation class: every query's neighbours share its label, so Precision@1 is 1 at
    every validation. The second one is no improvement (a tie), so with patience 1 training
    stops there, at iteration 4 of 8, and best.pth holds the weights of iteration 2."""
    _, work_dir = trained
    _, val_classes, _ = fixture_classes()
    assert len(val_classes) == 1
    stop = 2 * VAL_INTERVAL
    saved = {osp.basename(p) for p in glob.glob(osp.join(work_dir, '*.pth'))}
    assert saved == {'best.pth', f'iter_{VAL_INTERVAL}.pth', f'iter_{stop}.pth'}
    best = safe_torch_load(osp.join(work_dir, 'best.pth'))
    assert best['meta']['early_stopping'] == dict(best=100.0, wait=0, best_iter=VAL_INTERVAL,
                                                  validated_iter=VAL_INTERVAL)
    assert 'optimizer' not in best
    at_best = safe_torch_load(osp.join(work_dir, f'iter_{VAL_INTERVAL}.pth'))['state_dict']
    assert best['state_dict'].keys() == at_best.keys()
    for key, value in at_best.items():
        assert best['state_dict'][key].equal(value), key
    (log, ) = glob.glob(osp.join(work_dir, '*', '*.log'))
    with open(log) as f:
        text = f.read()
    assert f'early stopping at iteration {stop}' in text
    (scalars, ) = glob.glob(osp.join(work_dir, '*', 'vis_data', 'scalars.json'))
    with open(scalars) as f:
        validations = [r for r in map(json.loads, f) if 'precision@1' in r]
    assert [r['precision@1'] for r in validations] == [100.0, 100.0]  # percent


@pytest.mark.slow
def test_resumed_from_a_validation_iteration_stops_as_uninterrupted(trained, tmp_path):
    """iter_2.pth is written before iteration 2's validation (issue 47). Resumed from it, the
    run validates iteration 2 first, so it stops where the uninterrupted run did (iteration 4,
    a tie) with the same best weights; without that it would count iteration 4 as its first
    best and train on to 6."""
    loss, work_dir = trained
    resumed_dir = str(tmp_path / 'resumed')
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        train_tool.main([CONFIGS[loss], '--work-dir', resumed_dir,
                         '--resume', osp.join(work_dir, f'iter_{VAL_INTERVAL}.pth'),
                         '--cfg-options', *train_options(loss)])
    (log, ) = glob.glob(osp.join(resumed_dir, '*', '*.log'))
    with open(log) as f:
        text = f.read()
    assert 'written before that iteration\'s validation; running it now' in text
    assert f'early stopping at iteration {2 * VAL_INTERVAL}' in text
    best = safe_torch_load(osp.join(resumed_dir, 'best.pth'))
    whole = safe_torch_load(osp.join(work_dir, 'best.pth'))
    assert best['meta']['early_stopping'] == whole['meta']['early_stopping']
    for key, value in whole['state_dict'].items():
        assert best['state_dict'][key].equal(value), key


@pytest.mark.slow
def test_learning_rates_in_the_optimizer(trained):
    """Adam's groups as trained: the model at 1e-6, the classifier (ArcFace's D x C weight,
    the only parameter of that shape) alone at 1.0, no weight decay."""
    loss, work_dir = trained
    optimizer = safe_torch_load(osp.join(work_dir, f'iter_{VAL_INTERVAL}.pth'))['optimizer']
    classifier_shape = (DIM, len(fixture_classes()[0]))
    classifier = []
    for group in optimizer['param_groups']:
        assert group['weight_decay'] == 0.0
        shapes = [tuple(optimizer['state'][i]['exp_avg'].shape) for i in group['params']]
        if classifier_shape in shapes:
            assert shapes == [classifier_shape]
            classifier.append(group['lr'])
        else:
            assert group['lr'] == pytest.approx(MODEL_LR, rel=1e-12)
    assert classifier == ([CLASSIFIER_LR] if loss == 'arcface' else [])


def brute_force(embeddings, labels):
    """Leave-one-out MAP@R and Precision@1 (Musgrave et al. 2020) by sorting every row of the
    cosine-similarity matrix; queries alone in their class are dropped."""
    unit = embeddings.astype(np.float64)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    sim = unit @ unit.T
    np.fill_diagonal(sim, -np.inf)
    # Float32 search and this float64 one rank alike unless two similarities nearly tie.
    gaps = np.diff(np.sort(sim, axis=1)[:, 1:], axis=1)
    assert gaps.min() > 1e-6, 'near-tied similarities: the ranking is ambiguous'
    aps, firsts = [], []
    for i in range(len(labels)):
        r = int((labels == labels[i]).sum()) - 1
        if r == 0:
            continue
        relevant = labels[np.argsort(-sim[i], kind='stable')[:r]] == labels[i]
        precision = np.cumsum(relevant) / np.arange(1, r + 1)
        aps.append(float((precision * relevant).sum()) / r)
        firsts.append(float(relevant[0]))
    return dict(map_at_r=np.mean(aps), precision_at_1=np.mean(firsts))


@pytest.mark.slow
def test_best_weights_tested(trained, tmp_path, in_root):
    loss, work_dir = trained
    args = [CONFIGS[loss], osp.join(work_dir, 'best.pth'), '--work-dir', str(tmp_path)]
    options = ['--cfg-options', *common_options()]
    json_out = str(tmp_path / 'r.json')
    metrics = test_tool.main(args + ['--out', json_out] + options)
    with open(json_out) as f:
        reported = json.load(f)
    assert reported == pytest.approx(metrics)
    for key in ('map@r', 'precision@1'):
        assert 0.0 <= reported[key] <= 100.0, key  # percent

    npz_out = str(tmp_path / 'x.npz')
    test_tool.main(args + ['--out', npz_out] + options)
    results = np.load(npz_out)
    _, _, test_labels = fixture_classes()
    assert results['embeddings'].shape == (len(test_labels), DIM)
    assert sorted(np.unique(results['labels'], return_counts=True)[1]) == \
        sorted(np.unique(test_labels, return_counts=True)[1])
    expected = brute_force(results['embeddings'], results['labels'])
    assert reported['map@r'] == pytest.approx(100 * expected['map_at_r'], abs=1e-7)
    assert reported['precision@1'] == pytest.approx(100 * expected['precision_at_1'], abs=1e-7)


def test_amp_flag_is_refused_for_bf16_configs(tmp_path):
    with pytest.raises(SystemExit, match='already trains under bf16 autocast'):
        train_tool.main([CONFIGS['arcface'], '--work-dir', str(tmp_path), '--amp'])
