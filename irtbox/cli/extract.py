"""Embed a folder of images with a retrieval model: resumable shards, one or several processes.

Examples:
  python tools/extract.py CONFIG CKPT IMAGE_DIR OUT_DIR          # OUT_DIR/features.npz
  python tools/extract.py CONFIG CKPT IMAGE_DIR OUT_DIR --resume # after an interruption
  python tools/extract.py configs/quickstart/irt-r_vit-tiny_1xb64-500_digits.py \\
      work_dirs/quickstart/irt_r/iter_500.pth data/digits/test work_dirs/digits_features
  python tools/extract.py CONFIG CKPT IMAGE_DIR OUT_DIR --nproc 8  # 8 processes (GPUs or CPU)
  GPUS=16 tools/slurm_extract.sh PARTITION JOB CONFIG CKPT IMAGE_DIR OUT_DIR

Every image under IMAGE_DIR (jpg, jpeg, png, bmp, webp, tif, tiff, any case; sorted by path)
goes through the config's test pipeline. The work is cut into shards of --shard-size images,
each saved to OUT_DIR/shards/ as soon as it is done; rank r of N takes shards r, r+N, ...
--resume keeps the shards already there (same image list, shard size and model, else
refused); without it an OUT_DIR holding shards is refused. Rank 0 then merges them in order
into OUT_DIR/features.npz, an embeddings file (irtbox.structures.embeddings_file; read it with
irtbox.structures.load_embeddings, or np.load):

  embeddings (N x D float32), ids (the image paths), failed_ids, failed_reasons, identity

Unreadable images are skipped and listed there and in a warning; a model that gives NaN or inf
embeddings stops the run with an error. CKPT may be "none" (the config's own weights).
"""
import os

from irtbox.cli import add_cfg_options, checkpoint_argument, command_parser, worded
from irtbox.cli.launch import add_launch_arguments, relaunch
from irtbox.cli.prechecks import check_inputs
from irtbox.utils.checks import int_argument

__all__ = ['parse_args', 'main']


def parse_args(argv=None):
    """The command line of ``tools/extract.py`` (``argv``: default ``sys.argv[1:]``)."""
    parser = command_parser('Embed a folder of images.', __doc__)
    parser.add_argument('config')
    parser.add_argument('checkpoint', type=checkpoint_argument,
                        help='checkpoint file or URL, or "none"')
    parser.add_argument('image_dir')
    parser.add_argument('out_dir')
    parser.add_argument('--batch-size', type=int_argument(1), default=32)
    parser.add_argument('--num-workers', type=int_argument(0), default=2, help='decoding processes per rank')
    parser.add_argument('--shard-size', type=int_argument(1), default=4096)
    parser.add_argument('--resume', action='store_true',
                        help='keep the shards an interrupted run already wrote')
    add_cfg_options(parser)
    add_launch_arguments(parser)
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def main(argv=None):
    """Run the command: :func:`irtbox.apis.extract_folder`; its result on rank 0."""
    args = parse_args(argv)
    check_inputs(args.config, args.cfg_options, checkpoint=args.checkpoint,
                 folders=dict(IMAGE_DIR=args.image_dir))  # before any rank starts
    relaunch('extract', args, argv)
    from irtbox.apis.extract import extract_folder
    try:
        return extract_folder(args.config, args.checkpoint, args.image_dir, args.out_dir,
                              batch_size=args.batch_size, num_workers=args.num_workers,
                              shard_size=args.shard_size, resume=args.resume,
                              launcher=args.launcher, cfg_options=args.cfg_options)
    except (OSError, ValueError) as err:  # a full disk included: the message names the path
        raise SystemExit(f'extract: {worded(err)}')
