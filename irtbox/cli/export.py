"""Export a retrieval model to ONNX or TorchScript: image batch in, L2-normalised embeddings out.

Examples:
  python tools/deployment/export.py CONFIG CKPT --format onnx --out model.onnx
  python tools/deployment/export.py CONFIG CKPT --format torchscript --out model.pt
  python tools/deployment/export.py CONFIG CKPT --format onnx --out model_b1.onnx --fixed-batch 1
  python tools/deployment/export.py configs/dtop/dtop_r50-vit-b_8xb8-30e_sfm120k.py CKPT \\
      --format onnx --out dtop.onnx --dynamic-size

The exported model's input "images" is a B x 3 x H x W batch of RGB images in 0-255 (uint8 by
default, --input-dtype float32 for floats); the normalisation, any channel flip the model
needs, multi-scale descriptors and whitening are inside the graph. Its output "embeddings" is
B x D float32, L2-normalised. B is any batch size (the batch axis is dynamic; --fixed-batch N
pins it to N), H x W defaults to the model's input size: what its test pipeline gives a square
image (model.input_spec.size).

Right after export the file is run (onnxruntime on the CPU, torch.jit.load) on a batch of the
config's test images (random pixels when the dataset is not there) and compared with PyTorch:
max |diff| <= 1e-4 and cosine >= 0.99999, for each batch size (--batch-size images and one
fewer; the --fixed-batch N alone) and input size (--dynamic-size) checked, or the export fails
and nothing is written. FILE.json describes the input (its "batch": "dynamic" or N) and output
and records the check.
"""

from irtbox.cli import add_cfg_options, checkpoint_argument, command_parser, worded

__all__ = ['parse_args', 'main']


def parse_args(argv=None):
    parser = command_parser('Export an irtbox model.', __doc__)
    parser.add_argument('config')
    parser.add_argument('checkpoint', type=checkpoint_argument,
                        help='checkpoint (.pth/.safetensors/URL) or "none" for the '
                        'config\'s own weights')
    parser.add_argument('--format', choices=['onnx', 'torchscript'], required=True)
    parser.add_argument('--out', required=True, help='output file')
    parser.add_argument('--input-size', nargs=2, type=int, metavar=('H', 'W'),
                        help='input height and width (default: what the test pipeline gives a '
                        'square image)')
    batch = parser.add_mutually_exclusive_group()
    batch.add_argument('--fixed-batch', type=int, metavar='N',
                       help='a file that takes exactly N images (default: any batch size)')
    batch.add_argument('--dynamic-batch', action='store_true',
                       help='any batch size: the default; kept so that older command lines work')
    parser.add_argument('--dynamic-size', action='store_true',
                        help='any input size (models with dynamic position embedding or CNNs; '
                        'checked at a second size)')
    parser.add_argument('--batch-size', type=int,
                        help='images in the check batch (default 4; with --fixed-batch N: N)')
    parser.add_argument('--input-dtype', choices=['uint8', 'float32'], default='uint8')
    parser.add_argument('--opset', type=int, default=17, help='ONNX opset')
    parser.add_argument('--dynamo', action='store_true',
                        help='ONNX: the torch.export-based exporter instead of tracing')
    add_cfg_options(parser)
    args = parser.parse_args(argv)
    if args.input_size and min(args.input_size) <= 0:
        parser.error(f'argument --input-size: height and width must be positive, got '
                     f'{args.input_size[0]} {args.input_size[1]}')
    if args.fixed_batch is not None:
        if args.fixed_batch < 1:
            parser.error(f'argument --fixed-batch: expected a positive number of images, got '
                         f'{args.fixed_batch}')
        if args.batch_size not in (None, args.fixed_batch):
            parser.error(f'--batch-size {args.batch_size} with --fixed-batch '
                         f'{args.fixed_batch}: a fixed-batch file is checked at its own batch '
                         'size; leave --batch-size out')
        args.batch_size = args.fixed_batch
    elif args.batch_size is None:
        args.batch_size = 4
    elif args.batch_size < 1:
        parser.error(f'argument --batch-size: expected a positive number of images, got '
                     f'{args.batch_size}')
    elif args.batch_size < 2:
        parser.error('argument --batch-size: the dynamic batch axis is checked at two batch '
                     'sizes (N and N-1), so N must be at least 2, got 1; --fixed-batch 1 '
                     'exports a file for exactly one image')
    return args


def main(argv=None):
    args = parse_args(argv)
    from irtbox.cli.prechecks import check_inputs
    from irtbox.utils.extras import require_extra
    failures = (OSError, ValueError, ImportError)
    try:  # before the model is built
        if args.format == 'onnx':
            require_extra(('onnx', 'onnxruntime'), 'deploy', 'tools/deployment/export.py '
                          '--format onnx')
        check_inputs(args.config, args.cfg_options, checkpoint=args.checkpoint,
                     outputs={'--out': (args.out, False)})
    except failures as err:
        raise SystemExit(f'export: {worded(err)}')
    from irtbox.apis import init_model  # torch: after the checks
    from irtbox.deployment import ExportCheckError, export_model
    try:
        model = init_model(args.config, args.checkpoint, cfg_options=args.cfg_options)
        report = export_model(model, args.format, args.out, input_size=args.input_size,
                              dynamic_batch=args.fixed_batch is None,
                              dynamic_size=args.dynamic_size, batch_size=args.batch_size,
                              input_dtype=args.input_dtype, opset=args.opset, dynamo=args.dynamo)
    except (ExportCheckError, *failures) as err:
        raise SystemExit(f'export: {worded(err)}')
    inp = report['input']
    print(f'exported {args.out} ({report["exporter"]}): images {inp["dtype"]} RGB NCHW '
          f'{"B" if inp["batch"] == "dynamic" else inp["batch"]} x 3 x '
          f'{"H" if inp["dynamic_size"] else inp["height"]} x '
          f'{"W" if inp["dynamic_size"] else inp["width"]} -> embeddings '
          f'{report["output"]["dim"]}-d, L2-normalised; checked on {report["check_images"]}; '
          f'description in {args.out}.json')
    return report
