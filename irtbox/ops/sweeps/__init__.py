"""Sweeps: a grid of trainings (factor x value x dataset x loss x seed) run, collected into tables
and drawn as the training-recipe benchmark's figures (``irtbox sweep``, ``irtbox plot-sweep``). One
job per module: ``spec`` (read, check and expand a grid spec), ``families`` (each loss's family,
from its config), ``state`` (the files that say how far a run got), ``execute`` (run them, or print
their commands), ``tables`` and ``figures``."""
from .families import family_of, loss_families
from .execute import run_all, run_one
from .figures import plot_all, plot_factor
from .spec import (OFF_THE_SHELF, Run, SelectionError, expand, factor_values, load_spec,
                   select_runs, value_dir, value_entries)
from .state import (EMBEDDINGS, FAILED, LOG, PREEMPTED_MARK, RESULTS, TRAIN_DONE, checkpoint_of,
                    state_of)
from .tables import (SUMMARY_DECIMALS, collect, format_tables, metric_names, read_summary,
                     summarize, write_table)

__all__ = [
    'family_of', 'loss_families', 'plot_all', 'plot_factor', 'run_all',
    'run_one', 'OFF_THE_SHELF', 'Run', 'SelectionError', 'expand', 'factor_values', 'load_spec',
    'select_runs', 'value_dir', 'value_entries', 'EMBEDDINGS', 'FAILED', 'LOG', 'PREEMPTED_MARK',
    'RESULTS',
    'TRAIN_DONE', 'checkpoint_of', 'state_of', 'collect', 'metric_names', 'read_summary',
    'summarize', 'write_table', 'format_tables', 'SUMMARY_DECIMALS'
]
