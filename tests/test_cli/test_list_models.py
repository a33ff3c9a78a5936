"""list-models: the DIM column filled from the entry's descriptor where no weights say it,
and each RESULT says whose number it is (issue 49 item 7)."""
from irtbox.apis.model_zoo import ZooEntry
from irtbox.cli.list_models import rows


def test_dim_and_whose_result():
    paper = ZooEntry('a', 'a.py', None, 'm.yml', metadata={'Descriptor': 'CLS token, 384-d'},
                     results=[{'Dataset': 'SOP', 'Source': 'paper, Table 3',
                               'Metrics': {'Recall@1': 52.8}}])
    ours = ZooEntry('b', 'b.py', {'url': 'u', 'embedding_dim': 128}, 'm.yml',
                    results=[{'Dataset': 'SOP', 'Metrics': {'Recall@1': 80.1}}])
    bare = ZooEntry('c', 'c.py', None, 'm.yml')
    table = rows(['a', 'b', 'c'], dict(a=paper, b=ours, c=bare))
    assert [(r['dim'], r['result']) for r in table] == [
        ('384', 'SOP Recall@1 52.8 (paper)'), ('128', 'SOP Recall@1 80.1 (these weights)'),
        ('', '')]
