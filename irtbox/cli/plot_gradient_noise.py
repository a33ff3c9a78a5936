"""Draw IRT Fig. 4: gradient noise γ against the margin β, one line per KoLeo weight λ.

Each WORK_DIR is a training run with the GradientNoiseHook (e.g. the configs
of configs/irt/table5/, the β x λ grid). From each run this reads:

- γ: ``gamma_mean`` of ``<work_dir>/gradient_noise.json`` (written by the hook
  after training: the mean over training iterations of ||Cov(∇_z L_contr)||_*);
- β: ``model.head.losses.<loss>.margin`` of the config MMEngine dumped in the
  work dir (``<work_dir>/<config name>.py``), ``<loss>`` being the loss the
  hook measured (``loss`` in the json, e.g. ``contrastive``);
- λ: the weight of the head's ``KoLeoLoss`` (``model.head.loss_weights.<name>``,
  1 when not listed, as in EmbeddingHead); 0 when the head has no KoLeo loss.

It writes the figure (PNG) and, next to it, a CSV with one row per run
(same name, ``.csv``). Two runs with the same (β, λ), e.g. two backbones, are
an error: plot one backbone per figure.

Example:
  python tools/analysis_tools/plot_gradient_noise.py \\
      work_dirs/irt_deit-s_beta*-lambda*_1xb64-35k_sop --out figs/fig4_deit-s.png
"""
from typing import Tuple

from irtbox.cli import command_parser
from irtbox.visualization.gradient_noise import AXES

__all__ = ['parse_args', 'main']


def parse_args(argv=None):
    """The command line of ``plot_gradient_noise.py``."""
    parser = command_parser('Plot the gradient noise γ of IRT Fig. 4 from training work dirs.',
                            __doc__)
    parser.add_argument('work_dirs', nargs='+', metavar='WORK_DIR',
                        help='work dirs of runs trained with GradientNoiseHook')
    parser.add_argument('--out', required=True,
                        help='output PNG; the CSV of the points is written next to it')
    parser.add_argument('--x', choices=sorted(AXES), default='beta',
                        help='quantity on the x axis (default: beta)')
    parser.add_argument('--series', choices=sorted(AXES), default='lambda',
                        help='one line per value of this quantity (default: lambda)')
    parser.add_argument('--title', help='figure title (e.g. the backbone)')
    return parser.parse_args(argv)


def main(argv=None) -> Tuple[str, str]:
    """Read the runs, draw Fig. 4; returns (png path, csv path)."""
    args = parse_args(argv)
    if args.x == args.series:
        raise SystemExit(f'--x and --series must differ, both are {args.x!r}')
    from irtbox.visualization.gradient_noise import plot_gradient_noise, read_run
    rows = [read_run(w) for w in args.work_dirs]
    png, csv_path = plot_gradient_noise(rows, args.out, args.x, args.series, args.title)
    print(f'{png}\n{csv_path}')
    return png, csv_path
