"""A tiny labelled result with images on disk: a mix of good queries and failures."""
import numpy as np
import pytest
from PIL import Image


@pytest.fixture
def tiny_result(tmp_path):
    """dict(embeddings 16 x 8, labels (4 classes x 4), image_paths, class_names): class
    centres plus noise large enough that some nearest neighbours are of another class."""
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), 4)
    centres = rng.normal(size=(4, 8))
    embeddings = (centres[labels] + 0.9 * rng.normal(size=(16, 8))).astype(np.float32)
    paths = []
    for i, label in enumerate(labels):
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        path = tmp_path / 'images' / f'class{label}' / f'{i}.png'
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new('RGB', (40 + i, 30), colour).save(path)
        paths.append(str(path))
    return dict(embeddings=embeddings, labels=labels, image_paths=paths,
                class_names=['ant', 'bee', 'cat', 'dog'])
