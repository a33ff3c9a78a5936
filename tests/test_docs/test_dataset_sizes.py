"""One home for a dataset's download size: the dataset's spec, which `irtbox prepare` lists;
docs/datasets.md's table says the same (issue 49 item 7: CUB listed at 1.1 GB, documented at
~1.2 GB)."""
import os.path as osp
import re

from irtbox.cli.prepare import _size
from irtbox.datasets.spec import dataset_specs

DOCS = osp.join(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))), 'docs')


def test_the_table_lists_the_sizes_prepare_lists():
    with open(osp.join(DOCS, 'datasets.md')) as f:
        rows = re.findall(r'^\| `(\w+)` \| [^|]+ \| ~([^|]+?)(?: lists?)? \|', f.read(), re.M)
    specs = dataset_specs(preparable=True)
    assert {name for name, _ in rows} == set(specs)
    assert {name: size for name, size in rows} == {
        name: _size(spec.download_bytes) for name, spec in specs.items()}
