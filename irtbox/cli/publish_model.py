"""Publish a trained checkpoint into a model zoo folder.

Keeps the model weights only (no optimizer, scheduler or message-hub state; the losses'
classifiers and cross-batch memory and the momentum encoder are left out unless
--keep-training-state), checks them against the config's model, and writes into OUT_DIR:

  <name>-<first 8 hex of sha256>.safetensors   the weights (or .pth with --format pth)
  <name>.py                                   the full config
  model-index.yml                             the folder's zoo index (entry added/replaced)

then prints the metafile "Weights:" block (URL, full sha256, size, embedding dim).

Examples:
  python tools/misc/publish_model.py work_dirs/quickstart/irt_r/iter_500.pth zoo/ \\
      --config configs/quickstart/irt-r_vit-tiny_1xb64-500_digits.py --name irt-r_vit-tiny_digits
  IRTBOX_MODEL_INDEX=zoo/model-index.yml python -c \\
      "from irtbox.apis import get_model; print(get_model('irt-r_vit-tiny_digits'))"
  # serving the folder at https://example.org/zoo/: write the index with absolute URLs
  python tools/misc/publish_model.py CKPT zoo/ --url-prefix https://example.org/zoo/
"""

from irtbox.cli import command_parser, worded

__all__ = ['parse_args', 'main']


def parse_args(argv=None):
    parser = command_parser('Publish an irtbox checkpoint into a model zoo folder.', __doc__)
    parser.add_argument('checkpoint', metavar='CKPT',
                        help='training checkpoint (.pth or .safetensors)')
    parser.add_argument('out_dir', metavar='OUT_DIR',
                        help='zoo folder to write into (created when missing)')
    parser.add_argument('--name', help='zoo name of the model (default: the config file name, '
                        'else the checkpoint file name)')
    parser.add_argument('--format', choices=['safetensors', 'pth'], default='safetensors',
                        help='file format of the weights (default: safetensors, no pickle)')
    parser.add_argument('--config', help='the config the checkpoint was trained with '
                        '(default: the copy MMEngine stored in the checkpoint)')
    parser.add_argument('--url-prefix', help='URL the folder will be served from; the index '
                        'then names absolute URLs (default: file names relative to the index)')
    parser.add_argument('--keep-training-state', action='store_true',
                        help='keep the losses\' state and the momentum encoder (to fine-tune)')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    from irtbox.cli.prechecks import check_inputs
    failures = (FileNotFoundError, ValueError, RuntimeError)
    try:  # before the checkpoint is read (torch)
        check_inputs(args.config, checkpoint=args.checkpoint,
                     outputs={'OUT_DIR': (args.out_dir, True)})
    except failures as err:
        raise SystemExit(f'publish_model: {worded(err)}')
    from irtbox.apis import publish_checkpoint
    try:
        info = publish_checkpoint(args.checkpoint, args.out_dir, name=args.name,
                                  fmt=args.format, config=args.config,
                                  url_prefix=args.url_prefix,
                                  keep_training_state=args.keep_training_state)
    except failures as err:
        raise SystemExit(f'publish_model: {worded(err)}')
    print(f'published {info["name"]}: {info["path"]} ({info["size"]:,} bytes, '
          f'{info["embedding_dim"]}-d embeddings)')
    print(f'config {info["config"]}; zoo index {info["index"]}')
    print('metafile entry:\n  - Name: ' + info['name'] + '\n' + info['weights_block'], end='')
    return info
