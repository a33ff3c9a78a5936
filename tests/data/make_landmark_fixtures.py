"""Write the tiny landmark fixtures of tests/data/landmarks in the official layouts,
through irtbox's miniature writers (``irtbox.ops.miniature``).

Run once (``python tests/data/make_landmark_fixtures.py``); the files are committed,
and re-running it reproduces them byte for byte (seeded views, fixed JPEG
parameters and pickle protocol).

Every "landmark" is a fixed window of one of scikit-learn's two sample photos
(the Summer Palace pagoda and a dahlia); its images are views of that window,
shifted and scaled a little (``easy``), zoomed out or moved far (``hard``), or
barely overlapping it (``junk``), written as 64 x 48 (w x h) JPEGs. Different
landmarks come from different parts of the photos, so they look different and
a model can learn something.

- ``sfm120k/``: ``retrieval-SfM-120k.pkl`` (train: 8 clusters x 4 images, 3
  query/positive pairs per cluster; val: 4 clusters x 4 images), its images
  under ``ims/<cid[-2:]>/<cid[-4:-2]>/<cid[-6:-4]>/<cid>`` (no extension, as
  released), and ``retrieval-SfM-120k-whiten.pkl`` (8 images, 4 pairs).
- ``roxford5k/``: ``gnd_roxford5k.pkl`` + ``jpg/``: 3 queries (each a
  zoomed-out view, the landmark's box as ``bbx``) and a 16-image database
  with easy / easy / hard / junk views of every query's landmark and 4
  unrelated images.
- ``revisitop1m/``: 4 distractor images under ``jpg/`` and ``revisitop1m.txt``
  listing them (relative to ``jpg/``).
"""
import os.path as osp
import shutil

import cv2
import numpy as np
from sklearn.datasets import load_sample_images

from irtbox.ops.miniature import write_miniature
from irtbox.datasets.revisited import R1M_FIRST_CLASS

HERE = osp.join(osp.dirname(osp.abspath(__file__)), 'landmarks')
WIDTH, HEIGHT = 64, 48
_PHOTOS = [img[..., ::-1] for img in load_sample_images().images]  # RGB -> BGR, 427 x 640

# (photo, x, y, w, h): windows (of aspect 4:3 but for second_dahlia's 16:9) in the 640 x 427
# photos; a query's zoomed-out window must fit in its photo (see view).
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
    'second_dahlia': (1, 280, 322, 160, 90),
    'leaves_top_right': (1, 480, 10, 120, 90),
    'petals_right': (1, 330, 220, 120, 90),
    'leaves_bottom': (1, 0, 320, 120, 90),
}
# The landmark of each class: SfM-120k clusters 0-7 train, 8-11 val.
SFM_CLASSES = ['pagoda_top', 'pagoda_middle', 'lake', 'trees_right', 'dahlia_centre',
               'petals_top', 'leaves_left', 'leaves_top_right', 'pagoda_base', 'trees_left',
               'petals_right', 'leaves_bottom']
# ROxford5k: 3 query landmarks, then the 4 unrelated database images.
OXFORD_CLASSES = ['bushes', 'second_dahlia', 'haze', 'trees_left', 'petals_right',
                  'pagoda_base', 'lake']
OXFORD_RELEVANCE = ('easy', 'easy', 'hard', 'junk')
R1M_CLASSES = ['leaves_bottom', 'pagoda_middle', 'leaves_left', 'dahlia_centre']
# The writer's query box is the central three quarters of the query image.
QUERY_ZOOM = 4 / 3


def view(name: str, rng: np.random.Generator, kind: str = 'easy') -> np.ndarray:
    """A WIDTH x HEIGHT view of a landmark: ``easy`` (scale 0.85-1.15, shift up
    to 12 %), ``hard`` (zoomed out 1.4-1.7 or shifted 30-40 %), ``junk``
    (shifted 60-75 %, mostly outside the landmark) or ``query`` (zoomed out
    by QUERY_ZOOM, centred)."""
    photo, x, y, w, h = LANDMARKS[name]
    if kind == 'easy':
        scale, shift = rng.uniform(0.85, 1.15), rng.uniform(-0.12, 0.12, 2)
    elif kind == 'hard':
        scale, shift = rng.uniform(1.4, 1.7), rng.uniform(-0.1, 0.1, 2)
        if rng.random() < 0.5:
            scale, shift = rng.uniform(0.9, 1.1), rng.choice([-1, 1], 2) * rng.uniform(0.3, 0.4, 2)
    elif kind == 'junk':
        scale, shift = 1.0, rng.choice([-1, 1], 2) * rng.uniform(0.6, 0.75, 2)
    else:
        scale, shift = QUERY_ZOOM, np.zeros(2)
    cw, ch = w * scale, h * scale
    cx, cy = x + w / 2 + shift[0] * w, y + h / 2 + shift[1] * h
    img = _PHOTOS[photo]
    if kind == 'query' and not (0 <= cx - cw / 2 and cx + cw / 2 <= img.shape[1]
                                and 0 <= cy - ch / 2 and cy + ch / 2 <= img.shape[0]):
        # Moved to fit, the landmark would not be the central part that the writer's bbx is.
        raise ValueError(f'the query view of {name!r} does not fit in its photo')
    x0 = int(round(min(max(cx - cw / 2, 0), img.shape[1] - cw)))
    y0 = int(round(min(max(cy - ch / 2, 0), img.shape[0] - ch)))
    window = img[y0:y0 + int(round(ch)), x0:x0 + int(round(cw))]
    return cv2.resize(np.ascontiguousarray(window), (WIDTH, HEIGHT), interpolation=cv2.INTER_AREA)


def views_of(names, kind_of=lambda class_index, image_index: 'easy'):
    """An image_fn: image ``image_index`` of class ``class_index`` is a view of
    landmark ``names[class_index]`` of kind ``kind_of(class_index, image_index)``,
    drawn with a generator seeded by both indices."""
    def image_fn(class_index, image_index):
        rng = np.random.default_rng([class_index, image_index])
        return view(names[class_index], rng, kind_of(class_index, image_index))
    return image_fn


def oxford_kind(class_index: int, image_index: int) -> str:
    """Image 0 of a query landmark is its query, image k >= 1 its database view
    of relevance OXFORD_RELEVANCE[k - 1]; the unrelated images are easy views."""
    if class_index >= 3:
        return 'easy'
    return 'query' if image_index == 0 else OXFORD_RELEVANCE[(image_index - 1) % 4]


def main() -> None:
    shutil.rmtree(HERE, ignore_errors=True)
    write_miniature('sfm120k', osp.join(HERE, 'sfm120k'), views_of(SFM_CLASSES), classes=8,
                    per_class=4)
    write_miniature('roxford5k', osp.join(HERE, 'roxford5k'),
                    views_of(OXFORD_CLASSES, oxford_kind), classes=3, per_class=4,
                    relevance=OXFORD_RELEVANCE, others=4)
    write_miniature('revisitop1m', osp.join(HERE, 'revisitop1m'),
                    views_of({R1M_FIRST_CLASS + k: name for k, name in enumerate(R1M_CLASSES)},
                             lambda class_index, image_index: 'junk'), count=4)


if __name__ == '__main__':
    main()
