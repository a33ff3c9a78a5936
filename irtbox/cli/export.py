"""Export a retrieval model to ONNX or TorchScript: image batch in, L2-normalised embeddings out.

Examples:
  python tools/deployment/export.py CONFIG CKPT --format onnx --out model.onnx --dynamic-batch
  python tools/deployment/export.py CONFIG CKPT --format torchscript --out model.pt
  python tools/deployment/export.py configs/dtop/dtop_r50-vit-b_8xb8-30e_sfm120k.py CKPT \\
      --format onnx --out dtop.onnx --dynamic-batch --dynamic-size --dynamo

The exported model's input "images" is a B x 3 x H x W batch of RGB images in 0-255 (uint8 by
default, --input-dtype float32 for floats); the normalisation, any channel flip the model
needs, multi-scale descriptors and whitening are inside the graph. Its output "embeddings" is
B x D float32, L2-normalised. H x W defaults to the model's input size: what its test pipeline
gives a square image (model.input_spec.size).

Right after export the file is run (onnxruntime on the CPU, torch.jit.load) on a batch of the
config's test images (random pixels when the dataset is not there) and compared with PyTorch:
max |diff| <= 1e-4 and cosine >= 0.99999, for each batch size (--dynamic-batch) and input size
(--dynamic-size) checked, or the export fails and nothing is written. FILE.json describes the
input and output and records the check.
"""
import argparse

from irtbox.utils.config import DictAction

__all__ = ['parse_args', 'main']


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Export an irtbox model.', epilog=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint', help='checkpoint (.pth/.safetensors/URL) or "none" for the '
                        'config\'s own weights')
    parser.add_argument('--format', choices=['onnx', 'torchscript'], required=True)
    parser.add_argument('--out', required=True, help='output file')
    parser.add_argument('--input-size', nargs=2, type=int, metavar=('H', 'W'),
                        help='input height and width (default: what the test pipeline gives a '
                        'square image)')
    parser.add_argument('--dynamic-batch', action='store_true', help='any batch size')
    parser.add_argument('--dynamic-size', action='store_true',
                        help='any input size (models with dynamic position embedding or CNNs; '
                        'checked at a second size)')
    parser.add_argument('--batch-size', type=int, default=4, help='images in the check batch')
    parser.add_argument('--input-dtype', choices=['uint8', 'float32'], default='uint8')
    parser.add_argument('--opset', type=int, default=17, help='ONNX opset')
    parser.add_argument('--dynamo', action='store_true',
                        help='ONNX: the torch.export-based exporter instead of tracing')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, metavar='KEY=VALUE',
                        help='override config entries')
    args = parser.parse_args(argv)
    if args.batch_size < 2 and args.dynamic_batch:
        parser.error('--dynamic-batch needs --batch-size of at least 2 (two sizes are checked)')
    return args


def main(argv=None):
    args = parse_args(argv)
    from irtbox.apis import init_model
    from irtbox.deployment import ExportCheckError, export_model
    checkpoint = None if args.checkpoint.lower() == 'none' else args.checkpoint
    try:
        model = init_model(args.config, checkpoint, cfg_options=args.cfg_options)
        report = export_model(model, args.format, args.out, args.input_size, args.dynamic_batch,
                              args.dynamic_size, args.batch_size, args.input_dtype, args.opset,
                              args.dynamo)
    except (ExportCheckError, FileNotFoundError, ValueError, ImportError) as err:
        raise SystemExit(f'export: {err}')
    inp = report['input']
    print(f'exported {args.out} ({report["exporter"]}): images {inp["dtype"]} RGB NCHW '
          f'{"B" if inp["dynamic_batch"] else args.batch_size} x 3 x '
          f'{"H" if inp["dynamic_size"] else inp["height"]} x '
          f'{"W" if inp["dynamic_size"] else inp["width"]} -> embeddings '
          f'{report["output"]["dim"]}-d, L2-normalised; checked on {report["check_images"]}; '
          f'description in {args.out}.json')
    return report
