"""Embed a folder of images with a retrieval model: resumable shards, one or several processes.

Examples:
  python tools/extract.py CONFIG CKPT IMAGE_DIR OUT_DIR          # OUT_DIR/features.npz
  python tools/extract.py CONFIG CKPT IMAGE_DIR OUT_DIR --resume # after an interruption
  python tools/extract.py configs/quickstart/irt-r_vit-tiny_1xb64-500_digits.py \\
      work_dirs/quickstart/irt_r/iter_500.pth data/digits/test work_dirs/digits_features
  tools/dist_extract.sh CONFIG CKPT IMAGE_DIR OUT_DIR 8          # 8 processes (GPUs or CPU)
  GPUS=16 tools/slurm_extract.sh PARTITION JOB CONFIG CKPT IMAGE_DIR OUT_DIR

Every image under IMAGE_DIR (jpg, jpeg, png, bmp, webp, tif, tiff, any case; sorted by path)
goes through the config's test pipeline. The work is cut into shards of --shard-size images,
each saved to OUT_DIR/shards/ as soon as it is done; rank r of N takes shards r, r+N, ...
--resume keeps the shards already there (same image list, shard size and model, else
refused); without it an OUT_DIR holding shards is refused. Rank 0 then merges them in order
into OUT_DIR/features.npz:

  embeddings (N x D float32), ids (the image paths), failed_ids, failed_reasons

Unreadable images are skipped and listed there and in a warning. CKPT may be "none" (the
config's own weights).
"""
import argparse
import os
import os.path as osp
import time

from irtbox.utils.config import DictAction


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Embed a folder of images.', epilog=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint', help='checkpoint file or URL, or "none"')
    parser.add_argument('image_dir')
    parser.add_argument('out_dir')
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--num-workers', type=int, default=2, help='decoding processes per rank')
    parser.add_argument('--shard-size', type=int, default=4096)
    parser.add_argument('--resume', action='store_true',
                        help='keep the shards an interrupted run already wrote')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm'], default='none')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, metavar='KEY=VALUE',
                        help='override config entries')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ('batch_size', 'shard_size'):
        if getattr(args, name) < 1:
            parser.error(f'--{name.replace("_", "-")} must be positive, got {getattr(args, name)}')
    if args.num_workers < 0:
        parser.error(f'--num-workers must be 0 or more, got {args.num_workers}')
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def main(argv=None):
    args = parse_args(argv)
    import torch
    import torch.distributed as dist
    from mmengine.logging import print_log

    from irtbox.apis import (extract_to_shards, init_model, list_images, merge_shards,
                             prepare_shards, save_features)
    from irtbox.utils.dist import init_distributed
    started = time.time()
    rank, world = 0, 1
    if args.launcher != 'none':
        init_distributed(args.launcher)
        rank, world = dist.get_rank(), dist.get_world_size()
    device = f'cuda:{torch.cuda.current_device()}' if torch.cuda.is_available() else 'cpu'
    checkpoint = None if args.checkpoint.lower() == 'none' else args.checkpoint
    try:
        model = init_model(args.config, checkpoint, device=device, cfg_options=args.cfg_options)
        paths = list_images(args.image_dir)
        if rank == 0:  # the manifest is written (or checked) before the others look at it
            prepare_shards(model, args.out_dir, paths, args.shard_size, args.resume)
        if world > 1:
            dist.barrier()
        computed = extract_to_shards(model, paths, args.out_dir, args.shard_size, rank, world,
                                     args.batch_size, args.num_workers, resume=True,
                                     progress=rank == 0)
    except (FileNotFoundError, FileExistsError, ValueError) as err:
        raise SystemExit(f'extract (rank {rank}): {err}')
    if world > 1:
        dist.barrier()
    if rank != 0:
        return None
    result = merge_shards(args.out_dir)
    out = osp.join(args.out_dir, 'features.npz')
    save_features(out, result)
    dim = result.embeddings.shape[1]
    print_log(f'{len(result.ids)} of {len(paths)} images embedded ({dim}-d), '
              f'{len(result.failed)} unreadable; {world} process(es), rank 0 computed '
              f'{len(computed)} shard(s) of {args.shard_size}; {time.time() - started:.1f} s: '
              f'{out}', logger='current')
    return result
