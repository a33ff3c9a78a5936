"""Fixtures shared by the test folders."""
import pytest


@pytest.fixture(scope='module')
def timm_cache():
    """Route ``timm.create_model`` through a cache: each distinct call creates the model once
    (random weights; a pretrained download is refused); later calls return that same module.
    Nothing here trains, so models built from the same backbone config may share it."""
    import timm
    create, cache = timm.create_model, {}

    def cached(name, pretrained=False, **kwargs):
        assert not pretrained, 'tests build random weights: nothing can be downloaded'
        key = (name, repr(sorted(kwargs.items())))
        if key not in cache:
            cache[key] = create(name, pretrained=False, **kwargs)
        return cache[key]

    timm.create_model = cached
    yield
    timm.create_model = create
