"""Write scikit-learn's handwritten digits as a class-disjoint retrieval dataset
(irtbox/datasets/digits.py; its description follows in --help).

Example:
  python tools/dataset_converters/prepare_digits.py --out data/digits
"""

from irtbox.cli import command_parser, module_doc
from irtbox.utils.checks import int_argument

__all__ = ['main']


def main(argv=None):
    parser = command_parser(__doc__, module_doc('irtbox.datasets.digits'))
    parser.add_argument('--out', default='data/digits', help='output folder')
    parser.add_argument('--size', type=int_argument(1), default=32,
                        help='side of the written images')
    args = parser.parse_args(argv)
    from irtbox.datasets import digits  # torch: after --help
    counts = digits.prepare_digits(args.out, args.size)
    print(f'wrote {counts["train"]} train and {counts["test"]} test images under {args.out}')
    return counts
