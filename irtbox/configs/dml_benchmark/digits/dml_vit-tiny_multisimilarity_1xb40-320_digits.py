# The training-recipe benchmark's recipe on digits, small enough for a CPU (docs/sweeps.md's tiny
# sweep, configs/dml_benchmark/sweeps/digits_tiny.py): MultiSimilarityLoss with the
# multi-similarity miner, Adam (from scratch, so lr 2e-4 rather than the fine-tuning 1e-6),
# classifier group at lr 1.0, an "epoch" of 40 batches, early stopping on validation
# Precision@1 (digits 5-6) with patience 2, at most 8 epochs; test MAP@R and Precision@1 on
# digits 7-9.
_base_ = [
    '../../_base_/models/dml_vit-tiny_digits.py', '../../_base_/datasets/dml_digits.py',
    '../../_base_/schedules/dml_adam_1xb256-39k.py', '../../_base_/default_runtime.py'
]
model = dict(head=dict(losses=dict(metric=dict(
    name='MultiSimilarityLoss', num_classes={{_base_.num_train_classes}}))))
epoch_iters = 40
optim_wrapper = dict(optimizer=dict(lr=2e-4))
train_cfg = dict(max_iters=8 * epoch_iters, val_interval=epoch_iters)
custom_hooks = [
    dict(type='BestWeightsEarlyStoppingHook', monitor='precision@1', rule='greater', patience=2)
]
default_hooks = dict(logger=dict(interval=20))
