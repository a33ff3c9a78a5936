"""Collate functions, registered in MMEngine's ``FUNCTIONS`` registry (the one
``Runner.build_dataloader`` reads ``collate_fn=dict(type=...)`` from)."""
from typing import Sequence

from mmengine.dataset import pseudo_collate
from mmengine.registry import FUNCTIONS

__all__ = ['tuple_collate']


@FUNCTIONS.register_module()
def tuple_collate(data_batch: Sequence[Sequence[dict]]) -> dict:
    """Flatten a batch of tuples into one batch of images, in tuple order.

    ``data_batch`` holds B items of a tuple dataset (e.g. ``SfM120kDataset(tuples=True)``), each a
    list of T packed images ``{'inputs': C x H x W tensor, 'data_samples': DataSample}`` (query,
    positive, negatives). Returns MMEngine's ``pseudo_collate`` of the B x T images ``q_1, p_1,
    n_1_1 .. n_1_k, q_2, p_2, ...``:
    ``{'inputs': [B*T tensors], 'data_samples': [B*T samples]}``, so that the model's data
    preprocessor stacks them and a tuple loss can view the embeddings as B x T x D.
    """
    images = []
    for i, item in enumerate(data_batch):
        if not isinstance(item, (list, tuple)):
            raise TypeError(f'tuple_collate: item {i} of the batch is a {type(item).__name__}; '
                            'expected the list of packed images of one tuple (e.g. '
                            'SfM120kDataset with tuples=True)')
        images.extend(item)
    return pseudo_collate(images)
