# As the multi-similarity digits config, with NormalizedSoftmaxLoss (PML defaults, a classifier
# over the 5 training digits at lr 1.0); M = 8 as there (M = 1 would need 40 classes).
_base_ = ['./dml_vit-tiny_multisimilarity_1xb40-320_digits.py']
model = dict(head=dict(losses=dict(metric=dict(name='NormalizedSoftmaxLoss'))))
