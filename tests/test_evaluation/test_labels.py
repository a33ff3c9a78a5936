"""One rule for labels on both paths, a dataset's and the metrics' own (issue 48, item 7): a
label is its value (``1`` and ``'1'`` two classes, as a CSV's ``'05'`` and ``'5'``), and a NaN
label is refused in one line naming where."""
import numpy as np
import pytest

from irtbox.datasets.base_dataset import BaseRetrievalDataset
from irtbox.evaluation.functional.retrieval import retrieval_metrics

MIXED = [1, '1', 1, '1', 2, '2', 2, '2', 1, '1']


class Listed(BaseRetrievalDataset):
    """A dataset whose samples are given (``labels``), as a parse_samples would read them."""
    SPLITS = None

    def __init__(self, labels, **kwargs):
        self.labels = labels
        super().__init__(split=None, **kwargs)

    def parse_samples(self):
        return [dict(img_path=f'{i}.jpg', gt_label=label) for i, label in enumerate(self.labels)]


def _embeddings(n=10, seed=0):
    return np.random.default_rng(seed).standard_normal((n, 6)).astype(np.float32)


def test_mixed_labels_are_one_rule_on_both_paths():
    x = _embeddings()
    from_dataset = retrieval_metrics(x, Listed(MIXED).get_gt_labels(), ks=(1, 2), map_at_r=True)
    given = retrieval_metrics(x, MIXED, ks=(1, 2), map_at_r=True)
    assert given == from_dataset and Listed(MIXED).num_classes == 4
    # Before: NumPy made 1 into '1', two classes, not four.
    assert given != retrieval_metrics(x, [str(v) for v in MIXED], ks=(1, 2), map_at_r=True)
    # Query and gallery coded together (the dataset's codes: 1, 2, then '1', '2').
    assert retrieval_metrics(x[:2], [1, 2], x, MIXED, ks=(1, ))['recall@1'] == \
        retrieval_metrics(x[:2], [0, 1], x, Listed(MIXED).get_gt_labels(), ks=(1, ))['recall@1']


@pytest.mark.parametrize('labels', [np.array([0., 1., np.nan, 1., 0.]),
                                    [0, 'a', float('nan'), 'a', 0]])
def test_a_nan_label_is_refused_naming_the_item(labels):
    with pytest.raises(ValueError, match=r'^query_labels: the label of item 2 is NaN \(1 of 5 '
                       r'are\); expected a class for every item'):
        retrieval_metrics(_embeddings(5), labels, ks=(1, ), map_at_r=True)
    with pytest.raises(ValueError, match=r'^gallery_labels: the label of item 2 is NaN'):
        retrieval_metrics(_embeddings(2), [0, 1], _embeddings(5), labels, ks=(1, ))
    with pytest.raises(ValueError, match=r'^Listed \(\): the label of 2\.jpg is NaN \(1 of 5 '
                       r'samples are\); expected a class for every image'):
        Listed(list(labels))
