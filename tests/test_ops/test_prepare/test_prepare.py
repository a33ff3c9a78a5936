"""irtbox prepare / irtbox check against a server on 127.0.0.1 that serves miniature archives
in each dataset's official structure (the miniatures of irtbox.ops.miniature, packed as
the publishers pack them). The published checksums and counts of the dataset classes' specs
are replaced by the miniatures' own (the counts are those the miniature writers are asked
for: 8 classes of 4 images per split unless said otherwise)."""
import dataclasses
import hashlib
import io
import json
import os
import os.path as osp
import shutil
import tarfile
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from irtbox.cli import check as check_cli
from irtbox.cli import prepare as prepare_cli
from irtbox.cli import worded
from irtbox.datasets import count_mismatch, dataset_specs
from irtbox.ops.miniature import write_miniature
from irtbox.ops.miniaturize import config_dicts
from irtbox.ops.prepare import (PrepareError, check_dataset, prepare_dataset, read_manifest,
                                space_needed)
from irtbox.registry import DATASETS as DATASET_REGISTRY
from irtbox.utils.download import ChecksumError

SPECS = dataset_specs(preparable=True)  # what irtbox prepare / check know

# The miniatures' counts: {dataset: {split: counts}}, from the writers' arguments (8 x 4).
COUNTS = {
    'sop': {s: dict(images=32, classes=8) for s in ('train', 'test')},
    'cub': {s: dict(images=32, classes=8) for s in ('train', 'test')},
    'cars196': {s: dict(images=32, classes=8) for s in ('train', 'test')},
    'inat2018': {s: dict(images=32, classes=8) for s in ('train', 'test')},
    'inshop': dict(train=dict(images=32, classes=8),
                   test=dict(images=32, classes=8, queries=16, database=16)),
    # train 8 clusters x 4, val 4 clusters x 4, whitening 2 images per val cluster
    'sfm120k': dict(train=dict(images=32, classes=8), val=dict(images=16, classes=4),
                    whiten=dict(images=8)),
    'roxford5k': dict(roxford5k=dict(queries=8, database=8 * 4 + 4)),
    'rparis6k': dict(rparis6k=dict(queries=8, database=8 * 4 + 4)),
    'revisitop1m': dict(distractors=dict(images=8)),
    'gldv2clean': dict(train=dict(images=32, classes=8)),
    'gldv1noisy': dict(train=dict(images=32, classes=8)),
    'ncclean': dict(train=dict(images=32, classes=8)),
}
MANUAL = ('inshop', 'gldv1noisy', 'ncclean')  # from --from-dir


# --- packing miniatures as the publishers do ------------------------------------------------

def _tar(path, members, mode='w:gz'):
    """members: (name in the archive, file on disk)."""
    with tarfile.open(path, mode) as tar:
        for name, src in members:
            tar.add(src, arcname=name, recursive=False)


def _zip(path, members):
    with zipfile.ZipFile(path, 'w') as z:
        for name, src in members:
            z.write(src, name)


def _files(folder, under=''):
    """(path relative to folder, prefixed by under, absolute path) of every file."""
    out = []
    for dirpath, _, names in os.walk(folder):
        for n in sorted(names):
            full = osp.join(dirpath, n)
            out.append((osp.join(under, osp.relpath(full, folder)).replace(os.sep, '/'), full))
    return sorted(out)


def _pack(name, src, out):
    """Write dataset ``name``'s published files from the miniature tree ``src`` into ``out``."""
    os.makedirs(out)
    j = lambda *p: osp.join(out, *p)  # noqa: E731
    if name == 'sop':
        _zip(j('Stanford_Online_Products.zip'), _files(src, 'Stanford_Online_Products'))
    elif name == 'cub':  # the real archive also has attributes.txt beside the folder
        with open(osp.join(src, '..', 'attributes.txt'), 'w') as f:
            f.write('1 has_bill_shape::curved\n')
        _tar(j('CUB_200_2011.tgz'), _files(src, 'CUB_200_2011')
             + [('attributes.txt', osp.join(src, '..', 'attributes.txt'))])
    elif name == 'cars196':
        shutil.copy(osp.join(src, 'cars_annos.mat'), j('cars_annos.mat'))
        _tar(j('car_ims.tgz'), _files(osp.join(src, 'car_ims'), 'car_ims'))
    elif name == 'inshop':
        shutil.copy(osp.join(src, 'Eval', 'list_eval_partition.txt'), out)
        _zip(j('img.zip'), _files(osp.join(src, 'Img')))
    elif name == 'inat2018':
        _zip(j('Inat_dataset_splits.zip'),
             [(f'splits/{n}', osp.join(src, n)) for n in
              ('Inaturalist_train_set1.txt', 'Inaturalist_test_set1.txt')])
        _tar(j('train_val2018.tar.gz'), _files(osp.join(src, 'train_val2018'), 'train_val2018'))
    elif name == 'sfm120k':
        for n in ('retrieval-SfM-120k.pkl', 'retrieval-SfM-120k-whiten.pkl'):
            shutil.copy(osp.join(src, n), out)
        _tar(j('ims.tar.gz'), _files(osp.join(src, 'ims')))
    elif name in ('roxford5k', 'rparis6k'):
        shutil.copy(osp.join(src, f'gnd_{name}.pkl'), out)
        images = _files(osp.join(src, 'jpg'))
        if name == 'roxford5k':  # one archive, its images in a folder
            _tar(j('oxbuild_images-v1.tgz'), [(f'oxbuild_images/{n}', p) for n, p in images])
        else:  # two archives, the images in a folder per landmark
            for k, half in enumerate((images[::2], images[1::2]), 1):
                _tar(j(f'paris_{k}-v1.tgz'),
                     [(f'paris/{n.split("_")[-2]}/{n}', p) for n, p in half])
    elif name == 'revisitop1m':
        shutil.copy(osp.join(src, 'revisitop1m.txt'), out)
        for k in (0, 1):
            _tar(j(f'revisitop1m.{k + 1}.tar.gz'), _files(osp.join(src, 'jpg', str(k)), str(k)))
    elif name == 'gldv2clean':
        shutil.copy(osp.join(src, 'train_clean.csv'), out)
        images = _files(osp.join(src, 'train'))
        for k, part in enumerate((images[::2], images[1::2])):
            _tar(j(f'images_{k:03d}.tar'), part, mode='w')
            with open(j(f'md5.images_{k:03d}.txt'), 'w') as f:
                f.write(f'{_md5(j(f"images_{k:03d}.tar"))}  images_{k:03d}.tar\n')
    elif name == 'gldv1noisy':
        shutil.copy(osp.join(src, 'train.csv'), out)
        shutil.copytree(osp.join(src, 'train'), j('train'))
    elif name == 'ncclean':
        for split in ('train', 'val'):
            shutil.copy(osp.join(src, f'annotation_clean_{split}.txt'), out)
        shutil.copytree(osp.join(src, 'images'), j('images'))


def _md5(path):
    return hashlib.md5(open(path, 'rb').read()).hexdigest()


def _miniature_info(name, served):
    """The spec with the miniature's archives (GLDv2 and R1M: 2 of them), sizes and
    checksums: md5 where the spec has a published one."""
    info = SPECS[name]
    files = []
    for f in info.files:
        if name in ('gldv2clean', 'revisitop1m') and f.unpack and \
                not osp.isfile(osp.join(served, f.name)):
            continue
        path = osp.join(served, f.name)
        if f.md5:
            f = dataclasses.replace(f, md5=_md5(path))
        size = 0 if f.folder else osp.getsize(path)
        files.append(dataclasses.replace(f, size=size, unpacked=2 * size, approx=False))
    return dataclasses.replace(info, files=tuple(files))


# --- the server -------------------------------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):

    def log_message(self, *args):
        pass

    def do_GET(self):
        state = self.server.state
        rel = self.path.split('?')[0].lstrip('/')
        state['requests'].append((rel, self.headers.get('Range')))
        path = osp.join(state['dir'], rel)
        if not osp.isfile(path):
            self.send_error(404)
            return
        data = open(path, 'rb').read()
        start, status = 0, 200
        rng = self.headers.get('Range')
        if rng:
            start, status = int(rng.split('=')[1].rstrip('-')), 206
        self.send_response(status)
        self.send_header('Content-Length', str(len(data) - start))
        if status == 206:
            self.send_header('Content-Range', f'bytes {start}-{len(data) - 1}/{len(data)}')
        self.end_headers()
        body = data[start:]
        if rel in state['cut']:  # this path's first GET stops half-way
            state['cut'].discard(rel)
            body = body[:len(body) // 2]
        self.wfile.write(body)

    do_HEAD = do_GET


@pytest.fixture(scope='module')
def served(tmp_path_factory):
    """Every dataset's miniature packed under <dir>/<name>/, served on 127.0.0.1; yields
    (base URL, served folder, state)."""
    base = tmp_path_factory.mktemp('prepare')
    srv = base / 'srv'
    for name in SPECS:
        src = str(base / 'src' / name / 'tree')
        write_miniature(name, src, size=16)
        _pack(name, src, str(srv / name))
    state = dict(dir=str(srv), requests=[], cut=set())
    httpd = ThreadingHTTPServer(('127.0.0.1', 0), _Handler)
    httpd.state = state
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f'http://127.0.0.1:{httpd.server_address[1]}', str(srv), state
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope='module')
def prepared(served, tmp_path_factory):
    """Every dataset prepared once through --mirror (or --from-dir for the manual ones), under
    <dir>/<name>; the roots the configs' data/<name> become."""
    url, srv, state = served
    data = tmp_path_factory.mktemp('data')
    state['cut'].add('roxford5k/oxbuild_images-v1.tgz')  # a cut connection mid-archive
    for name in SPECS:
        info = _miniature_info(name, osp.join(srv, name))
        kwargs = dict(from_dir=osp.join(srv, name)) if name in MANUAL else dict(mirror=url)
        prepare_dataset(info, str(data / name), progress=False, log=lambda line: None,
                        **kwargs)
    return str(data)


@pytest.mark.slow
def test_every_dataset_prepares_into_the_layout_its_class_reads(prepared, served):
    for name in SPECS:
        report = check_dataset(_miniature_info(name, osp.join(served[1], name)),
                               osp.join(prepared, name), expected=COUNTS[name])
        assert report['ok'], (name, report['problems'])
        assert {s: v['counts'] for s, v in report['splits'].items()} == COUNTS[name], name
        assert all(v['missing'] == 0 and v['decoded'] > 0 for v in report['splits'].values())
    # archives deleted once unpacked; flattened and prefix-stripped trees; links for folders
    assert not osp.exists(osp.join(prepared, 'sop', 'downloads'))
    assert not osp.exists(osp.join(prepared, 'cub', 'attributes.txt'))
    assert osp.islink(osp.join(prepared, 'gldv1noisy', 'train'))
    # R1M as the configs' READMEs say: the list beside jpg/, read relative to jpg/
    oxford = DATASET_REGISTRY.build(dict(
        type='RevisitedDataset', dataset_name='roxford5k', data_root=osp.join(prepared,
                                                                              'roxford5k'),
        distractors_root=osp.join(prepared, 'revisitop1m', 'jpg'),
        distractors_list='../revisitop1m.txt', serialize_data=False))
    assert oxford.metainfo['num_distractors'] == 8 and all(
        osp.isfile(oxford.get_data_info(i)['img_path']) for i in range(len(oxford)))
    assert sorted(os.listdir(osp.join(prepared, 'inat2018'))) == [
        'Inaturalist_test_set1.txt', 'Inaturalist_train_set1.txt', 'irtbox_prepare.json',
        'train_val2018']


@pytest.mark.slow
def test_a_cut_connection_is_resumed_and_the_record_says_how_files_were_checked(prepared,
                                                                              served):
    requests = served[2]['requests']
    oxford = [r for r in requests if r[0] == 'roxford5k/oxbuild_images-v1.tgz']
    assert oxford[0][1] is None and oxford[1][1].startswith('bytes=') and len(oxford) == 2
    record = read_manifest(osp.join(prepared, 'roxford5k'))['files']
    assert 'no checksum is published' in record['oxbuild_images-v1.tgz']['checksum']
    served_tgz = osp.join(served[1], 'roxford5k', 'oxbuild_images-v1.tgz')
    assert record['oxbuild_images-v1.tgz']['sha256'] == \
        hashlib.sha256(open(served_tgz, 'rb').read()).hexdigest()
    gld = read_manifest(osp.join(prepared, 'gldv2clean'))['files']['images_001.tar']
    assert gld['checksum'].startswith('md5 matches the published one')


@pytest.mark.slow
def test_a_rerun_skips_finished_steps(prepared, served):
    url, srv, state = served
    before = len(state['requests'])
    lines = []
    prepare_dataset(_miniature_info('cub', osp.join(srv, 'cub')), osp.join(prepared, 'cub'),
                    mirror=url, progress=False, log=lines.append)
    assert len(state['requests']) == before and 'every step is done' in lines[0]


@pytest.mark.slow
def test_a_wrong_checksum_is_refused_and_nothing_is_unpacked(served, tmp_path):
    url, srv, _ = served
    info = _miniature_info('cub', osp.join(srv, 'cub'))
    info = dataclasses.replace(info, files=(dataclasses.replace(info.files[0], md5='0' * 32), ))
    root = tmp_path / 'cub'
    with pytest.raises(ChecksumError, match='md5 mismatch'):
        prepare_dataset(info, str(root), mirror=url, progress=False, log=lambda line: None)
    left = [osp.relpath(p, root) for p, _, names in os.walk(root) for p in
            [osp.join(p, n) for n in names]]
    assert left == [], left  # no images/, no .part, no record of a finished step


@pytest.mark.slow
def test_manual_files_and_disk_space_are_refused_with_the_way_out(served, tmp_path,
                                                                 monkeypatch):
    url, srv, _ = served
    with pytest.raises(PrepareError, match='DeepFashion download form'):
        prepare_dataset(SPECS['inshop'], str(tmp_path / 'a'), mirror=None,
                        progress=False, log=lambda line: None)
    assert not (tmp_path / 'a').exists()  # refused before anything is created
    with pytest.raises(PrepareError, match='list_eval_partition.txt is not in from_dir'):
        prepare_dataset(SPECS['inshop'], str(tmp_path / 'b'), from_dir=str(tmp_path),
                        progress=False, log=lambda line: None)
    import irtbox.ops.prepare.prepare as prepare_module
    monkeypatch.setattr(prepare_module, '_free_bytes', lambda path: 10**10)
    # 500 archives of 1 GB + a 30 MB csv in place, and one archive at a time being unpacked
    with pytest.raises(PrepareError, match=r'10\.0 GB free, about 501\.0 GB needed') as info:
        prepare_dataset(SPECS['gldv2clean'], str(tmp_path / 'c'), mirror=url,
                        progress=False, log=lambda line: None)
    # The library names its arguments, the command its options.
    assert str(info.value).endswith('choose another root (or pass check_space=False)')
    assert worded(info.value, dict(check_space='--no-space-check')).endswith(
        'choose another root (or pass --no-space-check)')
    # unpacked sizes plus the largest archive at a time, or all of them kept
    sop = SPECS['sop'].files[0]
    assert space_needed(SPECS['sop'], {}, False, None) == sop.unpacked + sop.size
    assert space_needed(SPECS['sop'], {sop.name: {}}, False, None) == 0


def test_prepare_without_a_network_says_so_and_names_the_ways_out(tmp_path, monkeypatch):
    """`irtbox prepare cub` where no name resolves: one line, true (no partial file is
    claimed), naming --mirror and --from-dir; nothing left in the download folder."""
    import socket

    from irtbox.cli import prepare as prepare_tool

    def no_dns(host, *args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, 'Name or service not known')
    monkeypatch.setattr(socket, 'getaddrinfo', no_dns)
    with pytest.raises(SystemExit) as stop:
        prepare_tool.main(['cub', '--root', str(tmp_path / 'cub'), '--no-progress'])
    message = str(stop.value.code)
    assert message.startswith('prepare cub: could not download https://data.caltech.edu/')
    assert 'the network is unreachable (the name data.caltech.edu does not resolve' in message
    assert '--from-dir DIR' in message and '--mirror URL' in message
    assert '.part' not in message and '\n' not in message
    assert os.listdir(tmp_path / 'cub' / 'downloads') == []


@pytest.fixture
def sop_copy(prepared, tmp_path):
    root = tmp_path / 'sop'
    shutil.copytree(osp.join(prepared, 'sop'), root)
    return root


def _check(root, *extra):
    out = root.parent / 'report.json'
    argv = ['sop', '--root', str(root), '--json', str(out), '--sample', '1000', *extra]
    counts = root.parent / 'counts.json'
    counts.write_text(json.dumps(COUNTS['sop']))
    try:
        check_cli.main([*argv, '--counts', str(counts)])
        code = 0
    except SystemExit as stop:
        code = stop.code
    return code, json.loads(out.read_text())


def _first_image(root, split='test'):
    lines = (root / f'Ebay_{split}.txt').read_text().splitlines()
    return root / lines[1].split()[3], lines


@pytest.mark.slow
def test_check_names_a_missing_file(sop_copy, capsys):
    image, _ = _first_image(sop_copy)
    image.unlink()
    code, report = _check(sop_copy)
    out = capsys.readouterr().out
    assert code == 1 and not report['ok'] and report['splits']['test']['missing'] == 1
    assert 'ERROR: test: 1 of 32 listed images are missing' in out and str(image) in out


@pytest.mark.slow
def test_check_names_a_damaged_image(sop_copy, capsys):
    image, _ = _first_image(sop_copy, 'train')
    image.write_bytes(image.read_bytes()[:40])
    code, report = _check(sop_copy, '--full')
    assert code == 1 and report['splits']['train']['undecodable'] == [str(image)]
    assert 'damaged' in capsys.readouterr().out


@pytest.mark.slow
def test_check_names_a_miscounted_split(sop_copy, capsys):
    image, lines = _first_image(sop_copy)
    (sop_copy / 'Ebay_test.txt').write_text('\n'.join(lines[:1] + lines[2:]) + '\n')
    code, report = _check(sop_copy)
    assert code == 1 and report['splits']['test']['counts']['images'] == 31
    assert 'test: 31 images (published: 32)' in capsys.readouterr().out


def test_check_from_the_command_line_names_the_command_that_prepares(tmp_path, capsys):
    """The fix line docs/datasets.md shows: the command, not the Python function."""
    root = tmp_path / 'sop'
    with pytest.raises(SystemExit):
        check_cli.main(['sop', '--root', str(root)])
    assert f'fix: run `irtbox prepare sop --root {root}` (see docs/datasets.md)' in capsys.readouterr().out


@pytest.mark.slow
def test_check_names_a_wrong_layout(sop_copy, capsys):
    nested = sop_copy / 'Stanford_Online_Products'
    nested.mkdir()
    for entry in os.listdir(sop_copy):
        if entry not in ('Stanford_Online_Products', 'irtbox_prepare.json'):
            shutil.move(str(sop_copy / entry), str(nested / entry))
    code, report = _check(sop_copy)
    out = capsys.readouterr().out
    assert code == 1 and 'extra folder level' in out and 'Stanford_Online_Products/' in out


@pytest.mark.slow
def test_check_passes_a_good_tree_and_the_count_warning_fires_on_the_published_counts(
        prepared):
    code, report = _check_path(osp.join(prepared, 'sop'))
    assert code == 0 and report['ok']
    dataset = DATASET_REGISTRY.build(dict(type='SOPDataset', split='test',
                                          data_root=osp.join(prepared, 'sop')))
    message = count_mismatch(dataset)
    assert '32 images (published: 60,502)' in message and "check_dataset('sop'" in message
    # a subset made on purpose is not a mismatch
    assert count_mismatch(DATASET_REGISTRY.build(dict(
        type='SOPDataset', split='test', data_root=osp.join(prepared, 'sop'),
        indices=4))) is None


def _check_path(root):
    import pathlib
    return _check(pathlib.Path(root))


def test_prepare_command_lists_and_refuses_two_sources(capsys):
    assert prepare_cli.main([]) is None
    out = capsys.readouterr().out
    assert all(name in out for name in SPECS) and ' 500 GB ' in out  # whole GB from 10 GB on
    ncclean = next(line for line in out.splitlines() if line.split()[0] == 'ncclean')
    expected = sum(f.size for f in SPECS['ncclean'].files) / 1e6  # under a GB: in MB
    assert f' {expected:.0f} MB ' in ncclean and ' 0.0 GB' not in out
    with pytest.raises(SystemExit):
        prepare_cli.main(['cub', '--mirror', 'http://x', '--from-dir', '.'])
    assert 'give one' in capsys.readouterr().err


def test_prepare_command_reports_a_failure_in_one_line(tmp_path):
    with pytest.raises(SystemExit, match=r'^prepare inshop: .*DeepFashion'):
        prepare_cli.main(['inshop', '--root', str(tmp_path / 'x'), '--no-progress'])


def test_an_archive_escaping_its_folder_is_refused(tmp_path):
    bad = tmp_path / 'srv'
    bad.mkdir()
    (tmp_path / 'x.txt').write_text('x')
    _tar(str(bad / 'CUB_200_2011.tgz'),
         [('CUB_200_2011/../../evil.txt', str(tmp_path / 'x.txt'))])
    info = dataclasses.replace(SPECS['cub'], files=(dataclasses.replace(
        SPECS['cub'].files[0], md5=None), ))
    with pytest.raises(PrepareError, match='outside the dataset folder'):
        prepare_dataset(info, str(tmp_path / 'root'), from_dir=str(bad), progress=False,
                        log=lambda line: None)
    assert not (tmp_path / 'evil.txt').exists()


@pytest.mark.slow
def test_tools_test_on_a_shipped_config_evaluates_on_the_prepared_tree(prepared, tmp_path):
    """IRT's SOP config as shipped (224 px DeiT-S, random weights: nothing is downloaded) on
    the prepared tree: it evaluates, and warns that the counts are not the published ones."""
    import glob
    from irtbox.cli import test as test_tool
    metrics = test_tool.main([
        'irt/irt-l_deit-s_1xb64-35k_sop.py', '--work-dir', str(tmp_path / 'w'),
        '--cfg-options', f'test_dataloader.dataset.data_root={osp.join(prepared, "sop")}',
        'model.backbone.pretrained=False', 'test_dataloader.num_workers=0',
        'test_dataloader.persistent_workers=False'])
    assert set(metrics) >= {'recall@1', 'recall@1000', 'map@r'}
    assert 0 < metrics['recall@1'] <= 100 and metrics['recall@1000'] == 100  # 32 images
    log = open(glob.glob(str(tmp_path / 'w' / '*' / '*.log'))[0]).read()
    assert 'WARNING - sop test under' in log and '32 images (published: 60,502)' in log


@pytest.mark.slow
def test_count_hook_warns_once_per_dataset_and_only_for_a_published_split(prepared):
    from types import SimpleNamespace
    from irtbox.engine.hooks.dataset_counts import DatasetCountCheckHook
    warnings = []
    sop = DATASET_REGISTRY.build(dict(type='SOPDataset', split='test',
                                      data_root=osp.join(prepared, 'sop')))
    own = [1, 2, 3]  # a dataset of no published benchmark: not checked
    loop = SimpleNamespace(dataloaders=[SimpleNamespace(dataset=sop),
                                        SimpleNamespace(dataset=own)])
    runner = SimpleNamespace(test_loop=loop, val_loop=loop,
                             logger=SimpleNamespace(warning=warnings.append))
    hook = DatasetCountCheckHook()
    hook.before_test(runner)
    hook.before_val(runner)
    assert len(warnings) == 1 and warnings[0].startswith('sop test under')


@pytest.mark.slow
def test_the_shipped_dataset_configs_read_the_roots_prepare_writes():
    """Every dataset of configs/_base_/datasets/ and DToP's training sets that a dataset
    spec describes reads that spec's default root (data/<name>), where `irtbox prepare
    NAME` writes."""
    import glob
    from mmengine.config import Config
    from irtbox.utils.config import CONFIGS_DIR
    roots = {}
    for info in SPECS.values():
        for view in info.views:
            key = (view.dataset['type'], view.dataset.get('dataset_name'))
            roots.setdefault(key, info.default_root)

    seen = set()
    paths = glob.glob(osp.join(CONFIGS_DIR, '_base_', 'datasets', '*.py')) + glob.glob(
        osp.join(CONFIGS_DIR, 'dtop', 'dtop_r50-vit-b_8xb8-30e_*.py'))  # the GLD / NC ones
    for path in paths:
        for node in config_dicts(Config.fromfile(path).to_dict()):
            key = (node.get('type'), node.get('dataset_name'))
            if key in roots and isinstance(node.get('data_root'), str):
                assert node['data_root'] == roots[key], (path, key)
                seen.add(key[0])
    assert seen >= {'SOPDataset', 'CUBDataset', 'Cars196Dataset', 'InShopDataset',
                    'INaturalist2018Dataset', 'SfM120kDataset', 'SfMWhitenDataset',
                    'RevisitedDataset', 'GLDv2CleanDataset', 'GLDv1NoisyDataset',
                    'NCCleanDataset'}, seen


@pytest.mark.slow
def test_a_downloaded_page_that_is_no_archive_is_deleted_for_the_next_run(served, tmp_path):
    """Google Drive answers some files with a page: no checksum is published for the split
    files, so the unpacking finds out, and the next run must not reuse the page."""
    url, srv, state = served
    page = osp.join(srv, 'inat2018', 'Inat_dataset_splits.zip')
    info = dataclasses.replace(SPECS['inat2018'], files=(SPECS['inat2018'].files[0], ))
    original = open(page, 'rb').read()
    try:
        with open(page, 'wb') as f:
            f.write(b'<html>Google Drive can\'t scan this file for viruses</html>')
        with pytest.raises(PrepareError, match='not a zip archive .* next run fetches it'):
            prepare_dataset(info, str(tmp_path / 'inat'), mirror=url, progress=False,
                            log=lambda line: None)
    finally:
        with open(page, 'wb') as f:
            f.write(original)
    assert not osp.exists(tmp_path / 'inat' / 'downloads')
    prepare_dataset(info, str(tmp_path / 'inat'), mirror=url, progress=False,
                    log=lambda line: None)
    assert (tmp_path / 'inat' / 'Inaturalist_train_set1.txt').is_file()


@pytest.mark.slow
def test_keep_archives_keeps_the_verified_download(served, tmp_path):
    url, srv, _ = served
    root = tmp_path / 'cub'
    prepare_dataset(_miniature_info('cub', osp.join(srv, 'cub')), str(root), mirror=url,
                    keep_archives=True, progress=False, log=lambda line: None)
    kept = root / 'downloads' / 'CUB_200_2011.tgz'
    assert kept.read_bytes() == open(osp.join(srv, 'cub', 'CUB_200_2011.tgz'), 'rb').read()
    assert (root / 'images.txt').is_file() and not (root / '.unpacking').exists()


def _one_archive(served, tmp_path, members):
    """A dataset of one .tgz without a published checksum on the test server; members:
    (name, bytes). Returns (its DatasetSpec, the archive's bytes)."""
    from irtbox.datasets.spec import RemoteFile
    url, srv, _ = served
    os.makedirs(osp.join(srv, 'onearchive'), exist_ok=True)
    path = osp.join(srv, 'onearchive', 'data.tgz')
    with tarfile.open(path, 'w:gz') as tar:
        for name, data in members:
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    info = dataclasses.replace(SPECS['cub'], name='onearchive', files=(
        RemoteFile(name='data.tgz', url='http://example.invalid/data.tgz', unpack='tar'), ))
    return info, path


@pytest.mark.slow
def test_a_truncated_archive_is_one_line_and_deleted(served, tmp_path):
    # Before: a raw tarfile.ReadError, and the cut .tgz stayed in downloads/, so every rerun,
    # even against a good mirror, failed the same way.
    url = served[0]
    info, path = _one_archive(served, tmp_path, [('a.txt', os.urandom(300_000))])
    whole = open(path, 'rb').read()
    with open(path, 'wb') as f:  # the mirror holds a file cut short
        f.write(whole[:len(whole) // 2])
    root = tmp_path / 'root'
    with pytest.raises(PrepareError, match=r'data.tgz: a damaged archive: a.txt cannot be read '
                       r'.* the next run fetches it again'):
        prepare_dataset(info, str(root), mirror=url, progress=False, log=lambda line: None)
    assert not (root / 'downloads').exists() and not (root / '.unpacking' / 'data.tgz').exists()
    with open(path, 'wb') as f:
        f.write(whole)
    prepare_dataset(info, str(root), mirror=url, progress=False, log=lambda line: None)
    assert (root / 'a.txt').stat().st_size == 300_000


@pytest.mark.slow
def test_an_archive_unpacking_far_beyond_its_size_is_stopped(served, tmp_path, monkeypatch):
    # Before: a 1 MB archive unpacking to a 1 GiB file was unpacked in full ("done"). The
    # floor is lowered so that a 4 MB file of zeros (a 4 KB archive) shows it in a moment.
    from irtbox.ops.prepare import prepare as prepare_module
    monkeypatch.setattr(prepare_module, 'MIN_UNPACK_LIMIT', 2**20)
    info, path = _one_archive(served, tmp_path, [('zeros.bin', bytes(4 * 2**20))])
    root = tmp_path / 'root'
    with pytest.raises(PrepareError, match=r'data.tgz: unpacking stopped at \d+ MB, more than '
                       r'100 times the archive'):
        prepare_dataset(info, str(root), mirror=served[0], progress=False,
                        log=lambda line: None)
    assert not (root / 'zeros.bin').exists() and not (root / '.unpacking' / 'data.tgz').exists()
    assert 'files' not in read_manifest(str(root)) or not read_manifest(str(root))['files']
