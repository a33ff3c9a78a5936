# Training-recipe benchmark: Adam lr 1e-6, no weight decay, no schedule; the classification
# losses' weights (sub-module 'pml_loss' of PMLLoss) in their own group at lr 1e-6 x 1e6 = 1.0.
# bf16 autocast: run tools/train.py with --amp on a CUDA GPU (AmpOptimWrapper, dtype bfloat16).
# An "epoch" is 390 batches: validate (Precision@1 on the held-out classes) every epoch, stop
# after 3 epochs without improvement, at most 100 epochs; the best weights are reloaded before
# the test.
model_lr = 1e-6
classifier_lr = 1.0
epoch_iters = 390
max_epochs = 100
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='Adam', lr=model_lr, weight_decay=0.0),
    paramwise_cfg=dict(custom_keys={'pml_loss': dict(lr_mult=classifier_lr / model_lr)}))
param_scheduler = []
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_epochs * epoch_iters,
                 val_interval=epoch_iters)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
custom_hooks = [
    dict(type='BestWeightsEarlyStoppingHook', monitor='precision@1', rule='greater', patience=3)
]
