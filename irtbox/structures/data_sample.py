"""The data element passed between the pipeline, the model and the metrics."""
import torch
from mmengine.structures import BaseDataElement

__all__ = ['DataSample']


class DataSample(BaseDataElement):
    """One image's annotations and, after ``mode='predict'``, its embedding.

    Meta fields (set by ``PackRetrievalInputs``): ``sample_idx`` (index in the
    dataset), ``img_path``, ``ori_shape``, ``img_shape``, and ``is_query`` for
    query/gallery datasets. Data fields: ``gt_label`` (0-d long tensor) and
    ``embedding`` (D float tensor, L2-normalised, set by the retriever).
    """

    def set_gt_label(self, label) -> 'DataSample':
        self.gt_label = torch.as_tensor(label, dtype=torch.long).reshape(())
        return self

    def set_embedding(self, embedding: torch.Tensor) -> 'DataSample':
        self.embedding = embedding
        return self
