import os.path as osp

import pytest

DATA_DIR = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), 'data')


@pytest.fixture
def data_dir():
    """tests/data, the tiny fixtures in the official layouts."""
    return DATA_DIR
