# The sweeps of Berton, Musgrave & Masone ("All You Need to Know About Training Image
# Retrieval Models"), Figures 4-10: each factor varied alone around the baseline recipe, for the
# 12 losses on the 4 datasets, 3 seeds, with the off-the-shelf DINOv2 as the horizontal line.
#   python tools/sweep.py configs/dml_benchmark/sweeps/berton2023_figs4-10.py \
#       --work-root work_dirs/berton2023 --emit slurm --partition gpu > jobs.sh
# The paper gives the ranges, not always every point; where it does not, the values below are
# our choice (powers of two, or decades). Points the data cannot hold fail fast and are left
# out of the figures, as in the paper (e.g. M = 1 or 2 with batch 256 on CUB / Cars196, whose
# 80 / 78 training classes cannot fill 256 / 128 distinct classes per batch; batch 512 with
# M = 4 there).
config = 'configs/dml_benchmark/dml_dinov2-vit-b_{loss}_1xb256-39k_{dataset}.py'
# The off-the-shelf model: a baseline config tested without training (its pretrained weights).
off_the_shelf = 'configs/dml_benchmark/dml_dinov2-vit-b_multisimilarity_1xb256-39k_{dataset}.py'
contrastive = ['circle', 'contrastive', 'multisimilarity', 'ntxent', 'snrcontrastive', 'tcm',
               'tripletmargin']
classification = ['arcface', 'cosface', 'normsoftmax', 'proxyanchor', 'softtriple']
losses = contrastive + classification
datasets = ['cars196', 'cub', 'inat2018', 'sop']
seeds = [0, 1, 2]
# The seed of the training and of the data draws (label noise, kept classes).
seed_options = ['randomness.seed={seed}', 'train_dataloader.dataset.seed={seed}']
metrics = ['map@r', 'precision@1']
factors = dict(
    batch_size=dict(
        figure=4, label='batch size', values=[32, 64, 128, 256, 512],
        options=['train_dataloader.batch_size={value}',
                 'train_dataloader.sampler.batch_size={value}']),
    label_noise=dict(
        figure=5, label='fraction of random training labels',
        values=[0.0, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64],
        options=['train_dataloader.dataset.label_noise={value}']),
    class_fraction=dict(
        figure=6, label='fraction of training classes kept',
        values=[0.125, 0.25, 0.5, 0.75, 1.0],
        options=['train_dataloader.dataset.class_fraction={value}']),
    dimension=dict(
        figure=7, label='feature dimension (linear layer; raw = the 768-d CLS)',
        values=[64, 128, 256, 512, 768, 1024, dict(value='raw', options=[])],
        options=['model.neck.1.out_dim={value}',
                 'model.head.losses.metric.embedding_size={value}']),
    images_per_class=dict(
        figure=8, label='images per class M (batch 256)', values=[1, 2, 4, 8, 16, 32],
        options=['train_dataloader.sampler.m={value}']),
    model_lr=dict(
        figure=9, label='model learning rate', log_x=True,
        values=[1e-8, 1e-7, 1e-6, 1e-5, 1e-4],
        options=['optim_wrapper.optimizer.lr={value}']),
    classifier_lr=dict(
        figure=10, label='classifier learning rate', log_x=True, losses=classification,
        values=[1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0],
        options=['optim_wrapper.paramwise_cfg.custom_keys.pml_loss.lr={value}']),
)
