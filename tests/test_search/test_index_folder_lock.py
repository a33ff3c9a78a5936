"""One writer of an index folder at a time (issue 48 item 1): before, two builds into one folder
both exited 0 and the index held the first's ids with the second's rows (fixed temporary names,
no lock). A build or save holds the folder's lock; a second one is refused in one line naming
the holder; a build's temporaries are its own and removed."""
import os
import os.path as osp
import re
import socket
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from irtbox.cli import search as search_tool
from irtbox.evaluation.neighbours.index import (HOLDER_FILE, LOCK_FILE, IndexFolderBusy,
                                               index_folder_lock)
from irtbox.search import ImageSearcher
from irtbox.search import build as build_module
from irtbox.search.build import build_index, build_index_from_features
from irtbox.structures.embeddings_file import EmbeddingSet, save_embeddings

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'configs', 'quickstart', 'irt-r_vit-tiny_1xb64-500_digits.py')
IDENTITY = dict(config=CONFIG, checkpoint=None, weights_sha256='w', preprocessing_sha256='p',
                embedding_dim=8, normalize=True)
HOLD = textwrap.dedent("""
    import sys, time
    from irtbox.evaluation.neighbours.index import index_folder_lock
    with index_folder_lock(sys.argv[1]):
        print('held', flush=True)
        time.sleep(120)
""")


def features(path, n=300, bad_row=None):
    x = np.random.default_rng(0).standard_normal((n, 8)).astype(np.float32)
    if bad_row is not None:
        x[bad_row] = np.nan
    save_embeddings(str(path), EmbeddingSet(x, ids=[f'v{i}' for i in range(n)],
                                            identity=IDENTITY))
    return str(path)


@pytest.fixture
def held(tmp_path):
    """An index folder whose lock another thread of this process holds (a thread's holding
    conflicts as another process's does: flock is per open file)."""
    folder, taken, done = str(tmp_path / 'index'), threading.Event(), threading.Event()

    def hold():
        with index_folder_lock(folder):
            taken.set()
            done.wait(60)
    thread = threading.Thread(target=hold)
    thread.start()
    taken.wait(10)
    try:
        yield folder, os.getpid(), ' '.join(sys.argv)
    finally:
        done.set()
        thread.join()


def refusal(folder, pid, command):
    """The line that refuses a writer of ``folder`` held by ``pid`` running ``command``."""
    return re.escape(f'{folder} is being written by another build or save (PID {pid} on '
                     f'{socket.gethostname()}, started ') + r'[-\d:T]+' + re.escape(
        f': {command}); two writers would mix their indexes: wait for it to end, or write '
        'into another folder')


def test_a_second_writer_is_refused_in_one_line_naming_the_holder(held, tmp_path):
    folder = held[0]
    who = refusal(*held)
    source = features(tmp_path / 'features.npz')
    with pytest.raises(IndexFolderBusy, match=f'^{who}$'):
        build_index_from_features(source, folder, progress=False, log=lambda line: None)
    # From images: refused before the model is built (the config is not even read).
    with pytest.raises(IndexFolderBusy, match=f'^{who}$'):
        build_index(str(tmp_path / 'no_config.py'), None, str(tmp_path), folder)
    searcher = ImageSearcher(identity=IDENTITY)
    searcher.add(np.eye(3, 8, dtype=np.float32), ids=['a', 'b', 'c'])
    with pytest.raises(IndexFolderBusy, match=f'^{who}$'):
        searcher.save(folder)
    with pytest.raises(SystemExit) as info:
        search_tool.main(['build', '--from-features', source, folder])
    assert re.fullmatch(f'search build: {who}', str(info.value.code))
    assert sorted(os.listdir(folder)) == sorted([LOCK_FILE, HOLDER_FILE])  # nothing written


def test_the_lock_is_given_back_and_a_build_saves_under_its_own(tmp_path):
    folder = str(tmp_path / 'index')
    source = features(tmp_path / 'features.npz')
    for _ in range(2):  # the second finds the folder free again
        done = build_index_from_features(source, folder, progress=False, log=lambda line: None)
        assert done.searcher.ids[:2] == ['v0', 'v1']
    assert not osp.exists(osp.join(folder, HOLDER_FILE))


def test_a_builds_temporaries_are_its_own_and_removed(tmp_path, monkeypatch):
    """Each build names its temporaries by a tag of its own; a killed build's are removed by
    the next (the folder is then the next's); a failing build removes its own."""
    folder = tmp_path / 'index'
    folder.mkdir()
    stale = folder / '.rows-from-features.0123456789ab.npy.tmp'
    stale.write_bytes(b'a killed build')
    written = []
    write_rows = build_module._write_rows
    monkeypatch.setattr(build_module, '_write_rows',
                        lambda parts, sets, path, *rest: written.append(path) or
                        write_rows(parts, sets, path, *rest))
    source = features(tmp_path / 'features.npz')
    for _ in range(2):
        build_index_from_features(source, str(folder), factory='IVF4,Flat', progress=False,
                                  log=lambda line: None)
    with pytest.raises(ValueError, match='not finite'):
        build_index_from_features(features(tmp_path / 'bad.npz', bad_row=5), str(folder),
                                  progress=False, log=lambda line: None)
    assert len(set(written)) == 3, written
    assert all(re.fullmatch(r'\.rows-from-features\.\w+\.npy\.tmp', osp.basename(p))
               for p in written)
    assert not [n for n in os.listdir(folder) if n.endswith('.tmp')], os.listdir(folder)


@pytest.mark.slow
def test_a_build_in_another_process_holds_the_folder(tmp_path):
    """The refusal across processes (hold.py holds the folder), and the lock given back when
    its holder is killed (flock: no stale lock)."""
    script, folder = tmp_path / 'hold.py', str(tmp_path / 'index')
    script.write_text(HOLD)
    holder = subprocess.Popen([sys.executable, str(script), folder], stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        assert holder.stdout.readline().strip() == 'held'
        source = features(tmp_path / 'features.npz')
        with pytest.raises(SystemExit) as info:
            search_tool.main(['build', '--from-features', source, folder])
        assert re.fullmatch('search build: ' + refusal(folder, holder.pid, f'{script} {folder}'),
                            str(info.value.code))
    finally:
        holder.kill()
        holder.wait()
    build_index_from_features(source, folder, progress=False, log=lambda line: None)
