# revisited_dtop.py's test, plus each re-ranker (docs/methods/reranking.md) after the whitened
# descriptor's first search, tagged with its name: <dataset>/<re-ranker>/mAP_M. A test-time switch:
# a config takes it in place of revisited_dtop.py in its _base_ list.
_base_ = ['./revisited_dtop.py']
_metrics = [dict(type='RevisitedMetric', protocols=('medium', 'hard')),
            dict(type='RevisitedMetric', protocols=('medium', 'hard'), embedding_key='embedding_raw',
                 tag='no_whitening')] + [
    dict(type='RevisitedMetric', protocols=('medium', 'hard'), rerank=dict(type=name), tag=name)
    for name in ('kreciprocal', 'diffusion', 'superglobal')]
test_evaluator = [_metrics, _metrics]
