"""Write the tiny landmark fixtures of tests/data/landmarks in the official layouts.

Run once (``python tests/data/make_landmark_fixtures.py``); the files are committed.

Every "landmark" is a fixed window of one of scikit-learn's two sample photos
(the Summer Palace pagoda and a dahlia); its images are views of that window,
shifted and scaled a little (``easy``), zoomed out or moved far (``hard``), or
barely overlapping it (``junk``), written as 64 x 48 (w x h) JPEGs. Different
landmarks come from different parts of the photos, so they look different and
a model can learn something.

- ``sfm120k/``: ``retrieval-SfM-120k.pkl`` (train: 8 clusters x 4 images, 2
  query/positive pairs per cluster; val: 3 clusters x 3 images), its images
  under ``ims/<cid[-2:]>/<cid[-4:-2]>/<cid[-6:-4]>/<cid>`` (no extension, as
  released), and ``retrieval-SfM-120k-whiten.pkl`` (6 images, 3 pairs).
- ``roxford5k/``: ``gnd_roxford5k.pkl`` + ``jpg/``: 3 queries (each a
  zoomed-out view with the landmark's box as ``bbx``, float coordinates) and a
  16-image database with easy / hard / junk views and unrelated images.
- ``revisitop1m/``: 4 distractor images and ``revisitop1m.txt`` listing them.
"""
import hashlib
import os
import os.path as osp
import pickle
import shutil

import cv2
import numpy as np
from sklearn.datasets import load_sample_images

HERE = osp.join(osp.dirname(osp.abspath(__file__)), 'landmarks')
WIDTH, HEIGHT = 64, 48
_PHOTOS = [img[..., ::-1] for img in load_sample_images().images]  # RGB -> BGR, 427 x 640

# (photo, x, y, w, h): windows of aspect 4:3 in the 640 x 427 photos.
LANDMARKS = {
    'pagoda_top': (0, 130, 30, 120, 90),
    'pagoda_middle': (0, 90, 150, 120, 90),
    'pagoda_base': (0, 70, 260, 160, 120),
    'lake': (0, 400, 200, 120, 90),
    'trees_right': (0, 520, 140, 120, 90),
    'trees_left': (0, 0, 330, 120, 90),
    'bushes': (0, 420, 320, 120, 90),
    'haze': (0, 300, 130, 120, 90),
    'dahlia_centre': (1, 250, 150, 120, 90),
    'petals_top': (1, 170, 90, 120, 90),
    'leaves_left': (1, 0, 100, 120, 90),
    'second_dahlia': (1, 280, 330, 160, 90),
    'leaves_top_right': (1, 480, 10, 120, 90),
    'petals_right': (1, 330, 220, 120, 90),
    'leaves_bottom': (1, 0, 320, 120, 90),
}


def view(name: str, rng: np.random.Generator, kind: str = 'easy') -> np.ndarray:
    """A WIDTH x HEIGHT view of a landmark: ``easy`` (scale 0.85-1.15, shift up
    to 12 %), ``hard`` (zoomed out 1.4-1.7 or shifted 30-40 %) or ``junk``
    (shifted 60-75 %, mostly outside the landmark)."""
    photo, x, y, w, h = LANDMARKS[name]
    if kind == 'easy':
        scale, shift = rng.uniform(0.85, 1.15), rng.uniform(-0.12, 0.12, 2)
    elif kind == 'hard':
        scale, shift = rng.uniform(1.4, 1.7), rng.uniform(-0.1, 0.1, 2)
        if rng.random() < 0.5:
            scale, shift = rng.uniform(0.9, 1.1), rng.choice([-1, 1], 2) * rng.uniform(0.3, 0.4, 2)
    else:
        scale, shift = 1.0, rng.choice([-1, 1], 2) * rng.uniform(0.6, 0.75, 2)
    cw, ch = w * scale, h * scale
    cx, cy = x + w / 2 + shift[0] * w, y + h / 2 + shift[1] * h
    return _crop(photo, cx - cw / 2, cy - ch / 2, cw, ch)


def _crop(photo: int, x0: float, y0: float, cw: float, ch: float) -> np.ndarray:
    img = _PHOTOS[photo]
    x0 = int(round(min(max(x0, 0), img.shape[1] - cw)))
    y0 = int(round(min(max(y0, 0), img.shape[0] - ch)))
    window = img[y0:y0 + int(round(ch)), x0:x0 + int(round(cw))]
    return cv2.resize(np.ascontiguousarray(window), (WIDTH, HEIGHT), interpolation=cv2.INTER_AREA)


def query_view(name: str, zoom: float = 1.6):
    """A zoomed-out view around the landmark and the landmark's box in its
    pixels, ``[x1, y1, x2, y2]`` (floats, right/bottom exclusive)."""
    photo, x, y, w, h = LANDMARKS[name]
    img = _PHOTOS[photo]
    cw, ch = w * zoom, h * zoom
    x0 = int(round(min(max(x + w / 2 - cw / 2, 0), img.shape[1] - cw)))
    y0 = int(round(min(max(y + h / 2 - ch / 2, 0), img.shape[0] - ch)))
    cw, ch = int(round(cw)), int(round(ch))
    fx, fy = WIDTH / cw, HEIGHT / ch
    bbx = [(x - x0) * fx, (y - y0) * fy, (x + w - x0) * fx, (y + h - y0) * fy]
    crop = cv2.resize(np.ascontiguousarray(img[y0:y0 + ch, x0:x0 + cw]), (WIDTH, HEIGHT),
                      interpolation=cv2.INTER_AREA)
    return crop, [round(v, 2) for v in bbx]


def write_jpg(path: str, img: np.ndarray) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    ok, data = cv2.imencode('.jpg', img, [cv2.IMWRITE_JPEG_QUALITY, 85])
    if not ok:
        raise OSError(f'could not encode {path}')
    with open(path, 'wb') as f:  # written directly: SfM-120k files have no extension
        f.write(data.tobytes())


def write_pkl(path: str, obj) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        pickle.dump(obj, f, protocol=4)


def cid_of(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def sfm_path(root: str, cid: str) -> str:
    return osp.join(root, 'ims', cid[-2:], cid[-4:-2], cid[-6:-4], cid)


def make_sfm_split(root, split, names, per_cluster, pairs_per_cluster, rng, first_cluster):
    cids, cluster, qidxs, pidxs = [], [], [], []
    # Interleave clusters (image i belongs to cluster i % n) so that nothing relies on grouping.
    for k in range(per_cluster):
        for c, name in enumerate(names):
            cid = cid_of(f'{split}/{name}/{k}')
            write_jpg(sfm_path(root, cid), view(name, rng))
            cids.append(cid)
            cluster.append(first_cluster + c)
    n = len(names)
    for c in range(n):
        members = [c + k * n for k in range(per_cluster)]
        for p in range(pairs_per_cluster):
            qidxs.append(members[p])
            pidxs.append(members[p + 1])
    return dict(cids=cids, cluster=cluster, qidxs=qidxs, pidxs=pidxs)


def make_sfm(root: str) -> None:
    rng = np.random.default_rng(0)
    train = ['pagoda_top', 'pagoda_middle', 'lake', 'trees_right', 'dahlia_centre', 'petals_top',
             'leaves_left', 'leaves_top_right']
    val = ['pagoda_base', 'trees_left', 'petals_right']
    db = dict(train=make_sfm_split(root, 'train', train, 4, 2, rng, first_cluster=0),
              val=make_sfm_split(root, 'val', val, 3, 1, rng, first_cluster=len(train)))
    write_pkl(osp.join(root, 'retrieval-SfM-120k.pkl'), db)
    cids, qidxs, pidxs = [], [], []
    for name in val:
        for k in range(2):
            cid = cid_of(f'whiten/{name}/{k}')
            write_jpg(sfm_path(root, cid), view(name, rng))
            cids.append(cid)
        qidxs.append(len(cids) - 2)
        pidxs.append(len(cids) - 1)
    write_pkl(osp.join(root, 'retrieval-SfM-120k-whiten.pkl'),
              dict(cids=cids, qidxs=qidxs, pidxs=pidxs))


def make_roxford(root: str) -> None:
    rng = np.random.default_rng(1)
    # (landmark, Oxford-style name prefix, query number)
    queries = [('bushes', 'all_souls', 13), ('second_dahlia', 'radcliffe_camera', 519),
               ('haze', 'magdalen', 78)]
    database = []  # (name, image, (query index, kind) or None)
    for q, (landmark, prefix, number) in enumerate(queries):
        for k, kind in enumerate(['easy', 'easy', 'hard', 'junk']):
            database.append((f'{prefix}_{number + 100 + k:06d}', view(landmark, rng, kind),
                             (q, kind)))
    for k, landmark in enumerate(['trees_left', 'petals_right', 'pagoda_base', 'lake']):
        database.append((f'oxford_{3000 + 17 * k:06d}', view(landmark, rng), None))
    order = rng.permutation(len(database))
    database = [database[i] for i in order]
    imlist, gnd = [], [dict(easy=[], hard=[], junk=[]) for _ in queries]
    for i, (name, img, tag) in enumerate(database):
        write_jpg(osp.join(root, 'jpg', f'{name}.jpg'), img)
        imlist.append(name)
        if tag is not None:
            gnd[tag[0]][tag[1]].append(i)
    qimlist = []
    for q, (landmark, prefix, number) in enumerate(queries):
        name = f'{prefix}_{number:06d}'
        img, bbx = query_view(landmark)
        write_jpg(osp.join(root, 'jpg', f'{name}.jpg'), img)
        qimlist.append(name)
        gnd[q]['bbx'] = bbx
    write_pkl(osp.join(root, 'gnd_roxford5k.pkl'), dict(imlist=imlist, qimlist=qimlist, gnd=gnd))


def make_r1m(root: str) -> None:
    rng = np.random.default_rng(2)
    lines = []
    for k, landmark in enumerate(['leaves_bottom', 'pagoda_middle', 'leaves_left',
                                  'dahlia_centre']):
        rel = f'jpg/{k % 2}/r1m_{k:07d}.jpg'
        write_jpg(osp.join(root, rel), view(landmark, rng, 'junk'))
        lines.append(rel)
    with open(osp.join(root, 'revisitop1m.txt'), 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines) + '\n')


def main() -> None:
    shutil.rmtree(HERE, ignore_errors=True)
    make_sfm(osp.join(HERE, 'sfm120k'))
    make_roxford(osp.join(HERE, 'roxford5k'))
    make_r1m(osp.join(HERE, 'revisitop1m'))


if __name__ == '__main__':
    main()
