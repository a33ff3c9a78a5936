# A tiny sweep of the training-recipe benchmark that runs on a CPU in a few minutes (the
# example of docs/sweeps.md): the model learning rate (the paper's Fig. 9) for one contrastive and one
# classification loss, two seeds, on the digits data, with the untrained model as the
# "off-the-shelf" line.
#   python tools/dataset_converters/prepare_digits.py        # once: data/digits
#   python tools/sweep.py configs/dml_benchmark/sweeps/digits_tiny.py \
#       --work-root work_dirs/sweep_digits --jobs 2
config = 'configs/dml_benchmark/digits/dml_vit-tiny_{loss}_1xb40-320_digits.py'
# The untrained model (seeded random init): a config tested without training.
off_the_shelf = 'configs/dml_benchmark/digits/dml_vit-tiny_multisimilarity_1xb40-320_digits.py'
losses = ['multisimilarity', 'normsoftmax']
datasets = ['digits']
seeds = [0, 1]
# The seed of the training (weights, batches) and of the data draws (label noise, kept classes).
seed_options = ['randomness.seed={seed}', 'train_dataloader.dataset.seed={seed}']
factors = dict(
    model_lr=dict(figure=9, label='model learning rate', log_x=True,
                  values=[1e-4, 1e-3], options=['optim_wrapper.optimizer.lr={value}']))
metrics = ['map@r', 'precision@1']
