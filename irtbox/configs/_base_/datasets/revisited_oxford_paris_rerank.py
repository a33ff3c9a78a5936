# revisited_oxford_paris.py's test, plus each re-ranker (docs/methods/reranking.md) after the first
# search, tagged with its name: <dataset>/<re-ranker>/mAP_M. A test-time switch: a config takes it
# in place of revisited_oxford_paris.py in its _base_ list.
_base_ = ['./revisited_oxford_paris.py']
_metrics = [dict(type='RevisitedMetric')] + [
    dict(type='RevisitedMetric', rerank=dict(type=name), tag=name)
    for name in ('kreciprocal', 'diffusion', 'superglobal')]
test_evaluator = [_metrics, _metrics]
