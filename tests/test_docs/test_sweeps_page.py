"""docs/sweeps.md's table is what tools/sweep.py prints for the tiny CPU sweep's spec."""
import os.path as osp
import re

from irtbox.ops import sweeps

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
PAGE = osp.join(ROOT, 'docs', 'sweeps.md')
SPEC = osp.join(ROOT, 'configs', 'dml_benchmark', 'sweeps', 'digits_tiny.py')


def test_the_page_shows_the_tools_table():
    with open(PAGE, encoding='utf-8') as f:
        shown = re.search(r'```\n(precision@1 \(%\) against .*?)```', f.read(), re.S).group(1)
    # The numbers the page shows, back into summary rows of the spec's grid.
    cells = {line.split()[0]: [float(x) for x in line.split()[1:]]
             for line in shown.strip().splitlines()[2:]}
    spec = sweeps.load_spec(SPEC)
    values = spec['factors']['model_lr']['values']
    summary = [dict(factor='model_lr', value=v, dataset='digits', loss=loss, family='',
                    metric='precision@1', n=2, mean=cells[loss][i], std=0.0, min=0.0, max=0.0)
               for loss in spec['losses'] for i, v in enumerate(values)]
    summary.append(dict(factor=sweeps.OFF_THE_SHELF, value=None, dataset='digits', loss='',
                        family='', metric='precision@1', n=1,
                        mean=cells['off-the-shelf'][0], std=0.0, min=0.0, max=0.0))
    assert sweeps.format_tables(summary, spec, metrics=['precision@1']) == shown.strip()


def test_a_value_with_its_own_options_gets_its_column():
    """A factor value written ``dict(value=V, options=[...])`` is a column like a plain one."""
    spec = dict(factors=dict(dim=dict(values=[128, dict(value='raw', options=[])],
                                      options=['model.neck.out_channels={value}'])),
                datasets=['digits'], losses=['arcface'])
    summary = [dict(factor='dim', value=v, dataset='digits', loss='arcface', family='',
                    metric='precision@1', n=1, mean=mean, std=0.0, min=mean, max=mean)
               for v, mean in ((128, 80.0), ('raw', 70.5))]
    table = sweeps.format_tables(summary, spec).splitlines()
    assert table[-2].split() == ['dim', '128', 'raw']
    assert table[-1].split() == ['arcface', '80.0', '70.5']
