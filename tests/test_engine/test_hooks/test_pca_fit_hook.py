"""PCAFitHook: the PCA neck is learned from training descriptors, saved and reused."""
import os.path as osp

import numpy as np
import pytest
import torch

from irtbox.cli import test as test_tool
from irtbox.cli import train as train_tool
from irtbox.utils.checkpoint import safe_torch_load

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))
CONFIG = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt_pca.py')


def train_descriptors(ckpt):
    """The 32-d CLS descriptors of the SOP fixture's training split, computed independently."""
    from irtbox.apis import init_model
    from irtbox.datasets import SOPDataset
    from irtbox.apis import register_all_modules
    register_all_modules()
    model = init_model(CONFIG, ckpt)
    pipeline = [dict(type='LoadImageFromFile'), dict(type='Resize', scale=(32, 32), keep_ratio=False),
                dict(type='PackRetrievalInputs')]
    dataset = SOPDataset(data_root='tests/data/sop', split='train', pipeline=pipeline)
    batch = model.data_preprocessor(
        dict(inputs=[dataset[i]['inputs'] for i in range(len(dataset))], data_samples=None))
    with torch.no_grad():
        return model.neck[0](model.backbone(batch['inputs'])), model


@pytest.mark.slow
def test_fit_save_and_reuse(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    work_dir = str(tmp_path)
    train_tool.main([CONFIG, '--work-dir', work_dir])
    ckpt = osp.join(work_dir, 'iter_4.pth')
    state = safe_torch_load(ckpt)['state_dict']
    assert bool(state['neck.1.fitted'])
    # The saved projection is the PCA of the final model's training descriptors.
    feats, model = train_descriptors(ckpt)
    centred = (feats - feats.mean(0)).double().numpy()
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    np.testing.assert_allclose(state['neck.1.mean'].numpy(), feats.mean(0).numpy(), atol=1e-5)
    np.testing.assert_allclose(np.abs(state['neck.1.projection'].numpy() @ vt[:8].T), np.eye(8),
                               atol=1e-3)
    out = str(tmp_path / 'r.npz')
    test_tool.main([CONFIG, ckpt, '--work-dir', work_dir, '--out', out])
    assert np.load(out)['embeddings'].shape[1] == 8


@pytest.mark.slow
def test_untrained_model_is_fitted_before_test(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = str(tmp_path / 'r.npz')
    metrics = test_tool.main([CONFIG, '--work-dir', str(tmp_path), '--out', out])
    assert np.load(out)['embeddings'].shape[1] == 8
    assert 0.0 <= metrics['recall@1'] <= 100.0  # percent


@pytest.mark.slow
def test_momentum_encoder_copy_is_left_alone(tmp_path, monkeypatch):
    """With a momentum encoder (a copy of the neck, PCA included) only the online PCA is fitted."""
    monkeypatch.chdir(ROOT)
    train_tool.main([CONFIG, '--work-dir', str(tmp_path), '--cfg-options', 'model.momentum=0.9',
                     'train_cfg.max_iters=2', 'train_cfg.val_interval=2'])
    state = safe_torch_load(osp.join(str(tmp_path), 'iter_2.pth'))['state_dict']
    assert bool(state['neck.1.fitted'])
    assert not bool(state['momentum_encoder.neck.1.fitted'])


def test_a_rank_that_receives_the_fit_reads_its_flag_again(monkeypatch):
    """Rank 1's view of a fit on 2 processes: the broadcast writes rank 0's buffers into its
    module; its host copy of the fitted flag must follow, or its first validation fails with
    'not fitted' (issue 47: the six ▷128 configs on 2 processes)."""
    import irtbox.engine.hooks.projection_fit_hook as fit_hook
    from irtbox.models.necks import PCAReduction
    fitted_on_rank0 = PCAReduction(in_dim=4, out_dim=2)
    fitted_on_rank0.set_projection(torch.arange(4.), torch.eye(4))
    sent = dict(fitted_on_rank0.named_buffers())
    receiver = PCAReduction(in_dim=4, out_dim=2).eval()
    names = {id(buf): name for name, buf in receiver.named_buffers()}
    monkeypatch.setattr(fit_hook, 'broadcast',
                        lambda buf, src: buf.copy_(sent[names[id(buf)]]))
    with pytest.raises(RuntimeError, match='not fitted'):
        receiver(torch.ones(1, 4))
    fit_hook.share_fitted(receiver)
    assert torch.equal(receiver(torch.ones(1, 4)), torch.tensor([[1., 0.]]))
