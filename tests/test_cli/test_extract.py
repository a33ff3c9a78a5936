"""tools/extract.py and tools/dist_extract.sh: one process and two CPU processes (gloo) give the
same features.npz (an embeddings file, as are the shards); a resume redoes only the missing
shards and refuses another job; corrupt images are listed; a model that gives NaN stops the
run before any features file is written."""
import logging
import os
import os.path as osp
import shutil
import subprocess

import numpy as np
import pytest
import torch

import irtbox.apis.extract as extract_module
from irtbox.apis import extract_features, init_model, list_images, merge_shards
from irtbox.apis.identity import model_identity
from irtbox.cli import extract as extract_tool
from irtbox.structures import EmbeddingSet, load_embeddings

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'configs', 'quickstart', 'irt-r_vit-tiny_1xb64-500_digits.py')


@pytest.fixture(scope='module')
def collection(tmp_path_factory, digits_root):
    """174 digit PNGs and an empty (unreadable) JPEG; a random-weight checkpoint."""
    root = tmp_path_factory.mktemp('collection')
    folder = root / 'images'
    shutil.copytree(digits_root / 'test' / '8', folder / 'eights')
    (folder / 'eights' / 'zero.jpg').write_bytes(b'')
    torch.manual_seed(0)
    checkpoint = str(root / 'model.pth')
    torch.save(init_model(CONFIG).state_dict(), checkpoint)
    return str(folder), checkpoint


def load(path):
    return load_embeddings(path, mmap=False)


@pytest.mark.slow
def test_one_process_equals_extract_features(collection, tmp_path, monkeypatch):
    folder, checkpoint = collection
    out = str(tmp_path / 'out')
    warnings = []
    monkeypatch.setattr(extract_module, 'print_log',
                        lambda msg, logger=None, level=logging.INFO: warnings.append(msg))
    result = extract_tool.main([CONFIG, checkpoint, folder, out, '--shard-size', '50',
                                '--num-workers', '0'])
    saved = load(osp.join(out, 'features.npz'))
    zero = osp.join(folder, 'eights', 'zero.jpg')
    assert len(warnings) == 2 and '1 of 175 images could not be read' in warnings[0]
    assert zero in warnings[0] and 'rank 0 computed 4 shard(s)' in warnings[1]
    assert [f[0] for f in saved.failed] == [zero] and saved.failed[0][1]
    model = init_model(CONFIG, checkpoint)
    direct = extract_features(model, folder, progress=False)
    assert saved.ids == direct.ids == result.ids and len(direct.ids) == 174
    np.testing.assert_array_equal(saved.embeddings, direct.embeddings)
    assert saved.identity == direct.identity == model_identity(model) == result.identity
    assert isinstance(result, EmbeddingSet)
    assert sorted(os.listdir(osp.join(out, 'shards'))) == [f'shard_{i:06d}.npz' for i in range(4)]
    shard = load(osp.join(out, 'shards', 'shard_000001.npz'))  # an embeddings file too
    assert shard.ids == direct.ids[50:100] and shard.identity == saved.identity
    with np.load(osp.join(out, 'features.npz')) as plain:  # readable without irtbox
        assert plain['ids'].tolist() == saved.ids


@pytest.mark.slow
def test_resume(collection, tmp_path, request):
    folder, checkpoint = collection
    out = str(tmp_path / 'out')
    args = [CONFIG, checkpoint, folder, out, '--shard-size', '50', '--num-workers', '0']
    extract_tool.main(args)
    before = load(osp.join(out, 'features.npz'))
    shards = [osp.join(out, 'shards', f'shard_{i:06d}.npz') for i in range(4)]
    mtimes = [os.stat(s).st_mtime_ns for s in shards]
    os.remove(shards[1])
    with pytest.raises(FileNotFoundError, match=r'1 of 4 shards are missing \(.*shard_000001'):
        merge_shards(out)
    with pytest.raises(SystemExit, match='pass --resume'):
        extract_tool.main(args)

    embedded = request.getfixturevalue('embedded_items')
    extract_tool.main(args + ['--resume'])
    assert embedded == list_images(folder)[50:100]  # only the deleted shard
    assert [os.stat(s).st_mtime_ns for i, s in enumerate(shards) if i != 1] == mtimes[:1] + \
        mtimes[2:]
    after = load(osp.join(out, 'features.npz'))
    assert after.ids == before.ids
    np.testing.assert_array_equal(after.embeddings, before.embeddings)


@pytest.mark.slow
def test_resume_of_another_job_is_refused(collection, tmp_path):
    folder, checkpoint = collection
    out = str(tmp_path / 'out')
    extract_tool.main([CONFIG, checkpoint, folder, out, '--shard-size', '100', '--num-workers',
                       '0'])
    more = tmp_path / 'more'
    shutil.copytree(folder, more)
    shutil.copy(osp.join(folder, 'eights', 'zero.jpg'), more / 'one_more.png')
    with pytest.raises(SystemExit, match=r'other images, images_sha256 \(images: 175 then, 176'):
        extract_tool.main([CONFIG, checkpoint, str(more), out, '--shard-size', '100', '--resume'])
    with pytest.raises(SystemExit, match='other shard_size, shards'):
        extract_tool.main([CONFIG, checkpoint, folder, out, '--shard-size', '50', '--resume'])
    other = str(tmp_path / 'other.pth')
    torch.manual_seed(1)
    torch.save(init_model(CONFIG).state_dict(), other)
    with pytest.raises(SystemExit, match='other model .*model: weights_sha256'):
        extract_tool.main([CONFIG, other, folder, out, '--shard-size', '100', '--resume'])


@pytest.mark.slow
def test_two_cpu_processes_equal_one(collection, tmp_path):
    full, checkpoint = collection
    # 43 of the digits and the unreadable JPEG: 5 shards of 9 items, the last one short.
    folder = tmp_path / 'images'
    (folder / 'eights').mkdir(parents=True)
    names = sorted(n for n in os.listdir(osp.join(full, 'eights')) if n != 'zero.jpg')[:43]
    for name in names + ['zero.jpg']:
        shutil.copy(osp.join(full, 'eights', name), folder / 'eights')
    folder = str(folder)
    single = str(tmp_path / 'single')
    extract_tool.main([CONFIG, checkpoint, folder, single, '--shard-size', '9',
                       '--num-workers', '0'])
    double = str(tmp_path / 'double')
    env = dict(os.environ, OMP_NUM_THREADS='1', PORT=str(29600 + os.getpid() % 300))
    result = subprocess.run(['bash', osp.join(ROOT, 'tools', 'dist_extract.sh'), CONFIG,
                             checkpoint, folder, double, '2', '--shard-size', '9',
                             '--num-workers', '0'], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'rank 0 computed 3 shard(s)' in result.stdout + result.stderr  # of 5: 0, 2, 4
    a, b = load(osp.join(single, 'features.npz')), load(osp.join(double, 'features.npz'))
    assert a.ids == b.ids
    np.testing.assert_allclose(a.embeddings, b.embeddings, atol=1e-6)
    assert b.failed == a.failed and b.identity == a.identity


@pytest.mark.slow
def test_a_checkpoint_holding_nan_stops_before_any_features_file(collection, tmp_path):
    folder, checkpoint = collection
    state = torch.load(checkpoint)
    name = next(k for k, v in state.items() if v.is_floating_point() and v.dim() == 2)
    state[name][0, 0] = float('nan')
    broken = str(tmp_path / 'nan.pth')
    torch.save(state, broken)
    out = str(tmp_path / 'out')
    with pytest.raises(SystemExit, match=r'extract: shard 1/4: 50 of 50 images gave non-finite '
                                         r'\(NaN or inf\) embeddings \(.*eights/.* and 45 more\);'
                                         rf" the model's weights hold NaN or inf \({name}"):
        extract_tool.main([CONFIG, broken, folder, out, '--shard-size', '50', '--num-workers', '0'])
    assert not osp.exists(osp.join(out, 'features.npz'))
    assert os.listdir(osp.join(out, 'shards')) == []
