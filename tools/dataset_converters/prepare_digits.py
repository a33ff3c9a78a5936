"""Write scikit-learn's handwritten digits as a class-disjoint retrieval dataset.

The 1,797 8x8 digit images bundled with scikit-learn are upscaled to SIZE x SIZE
PNG files in the generic folder format::

    OUT/train/<digit>/<index>.png   digits 0-4 (training classes)
    OUT/test/<digit>/<index>.png    digits 5-9 (unseen test classes)

plus OUT/benchmark_split.csv, the same images split for the training-recipe
benchmark's examples (CSVDataset format ``path,label,split``): digits 0-6 are
the 'train' split (its first 5 classes train, the last 2 validate), 7-9 the
'test' split. A validation part needs several classes, and 5 of the 10 digits
are too few to leave both a training and a validation part.

Example:
  python tools/dataset_converters/prepare_digits.py --out data/digits
"""
import argparse

from irtbox.datasets.digits import prepare_digits


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--out', default='data/digits', help='output folder')
    parser.add_argument('--size', type=int, default=32, help='side of the written images')
    args = parser.parse_args()
    counts = prepare_digits(args.out, args.size)
    print(f'wrote {counts["train"]} train and {counts["test"]} test images under {args.out}')


if __name__ == '__main__':
    main()
