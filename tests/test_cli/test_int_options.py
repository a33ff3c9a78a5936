"""The commands' integer options are refused at parsing, in argparse's one line, when out of
their range (int_argument), before anything is read or built."""
import pytest

from irtbox.cli import browse_results, plot_embeddings, prepare_digits, rehearse, sweep
from irtbox.cli import test as test_cli


@pytest.mark.parametrize('parse,argv,message', [
    (plot_embeddings.parse_args, ['r.npz', '--max-points', '2'],
     'argument --max-points: the value must be an integer >= 3, got 2'),
    (plot_embeddings.parse_args, ['r.npz', '--thumbnails', '-1'],
     'argument --thumbnails: the value must be a non-negative integer, got -1'),
    (prepare_digits.main, ['--size', '0'],
     'argument --size: the value must be a positive integer, got 0'),
    (browse_results.parse_args, ['r.npz', '--out-dir', 'o', '--topk', '0'],
     'argument --topk: the value must be a positive integer, got 0'),
    (browse_results.parse_args, ['r.npz', '--out-dir', 'o', '--worst', '-2'],
     'argument --worst: the value must be a non-negative integer, got -2'),
    (test_cli.parse_args, ['c.py', '--show-num', '0'],
     'argument --show-num: the value must be a positive integer, got 0'),
    (rehearse.parse_args, ['c.py', '--iters', '0'],
     'argument --iters: the value must be a positive integer, got 0'),
    (rehearse.parse_args, ['c.py', '--workers', '1.5'],
     "argument --workers: the value must be a non-negative integer, got '1.5'"),
    (sweep.parse_args, ['s.py', '--work-root', 'w', '--gpus', '-1'],
     'argument --gpus: the value must be a non-negative integer, got -1'),
])
def test_out_of_range_integer_options_are_one_line(parse, argv, message, capsys):
    with pytest.raises(SystemExit):
        parse(argv)
    assert message in capsys.readouterr().err
