"""Turns on ``tests.gpu_semantics.nccl_rules`` for the whole life of a process started by a
test with ``tests.gpu_semantics.rank_env`` (the ranks of a multi-process run): a rank that
breaks one of NCCL's rules then fails as it would on GPUs."""
import os

if os.environ.get('IRTBOX_TEST_NCCL_RULES') == '1':
    from tests.gpu_semantics import nccl_rules

    # Held for the process's whole life: a context manager that is collected exits.
    _RULES = nccl_rules()
    _RULES.__enter__()
