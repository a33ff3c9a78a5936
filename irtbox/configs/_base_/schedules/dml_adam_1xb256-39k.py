# Training-recipe benchmark: Adam lr 1e-6, no weight decay, no schedule; the classification
# losses' weights (sub-module 'pml_loss' of PMLLoss) in their own group at lr 1.0 (MMEngine's
# optimizer constructor copies a custom key's fields, here 'lr', into its parameter group, so
# the two learning rates are independent keys: optim_wrapper.optimizer.lr and
# optim_wrapper.paramwise_cfg.custom_keys.pml_loss.lr).
# bf16 autocast for the training forward and loss where the GPU supports it, float32 elsewhere
# (BF16AutocastOptimWrapper, enabled='auto'; True / False force it).
# An "epoch" is 390 batches: validate (Precision@1 on the held-out classes) every epoch, stop
# after 3 epochs without improvement, at most 100 epochs; the best weights are reloaded before
# the test.
model_lr = 1e-6
classifier_lr = 1.0
epoch_iters = 390
max_epochs = 100
optim_wrapper = dict(
    type='BF16AutocastOptimWrapper',
    enabled='auto',
    optimizer=dict(type='Adam', lr=model_lr, weight_decay=0.0),
    paramwise_cfg=dict(custom_keys={'pml_loss': dict(lr=classifier_lr)}))
param_scheduler = []
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_epochs * epoch_iters,
                 val_interval=epoch_iters)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
custom_hooks = [
    dict(type='BestWeightsEarlyStoppingHook', monitor='precision@1', rule='greater', patience=3)
]
