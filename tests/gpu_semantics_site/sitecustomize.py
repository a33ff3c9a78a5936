"""Turns on ``tests.gpu_semantics.nccl_rules`` in a process started with
``IRTBOX_TEST_NCCL_RULES=1`` (``tests/conftest.py`` sets it for every process the tests start,
``tests.gpu_semantics.rank_env`` for ranks): once ``torch.distributed`` is imported, its process
group starts under the rules (``rules_from_the_start``, at the first ``init_process_group``), so
a rank that breaks one of NCCL's rules fails as it would on GPUs, however it was started. A process that never imports
``torch.distributed`` (a light command) does not import torch for it."""
import os
import sys

if os.environ.get('IRTBOX_TEST_NCCL_RULES') == '1':
    import importlib.abc
    import importlib.util

    class _AfterTorchDistributed(importlib.abc.MetaPathFinder):
        """Finds nothing itself: wraps the loading of ``torch.distributed`` so that the rules
        are installed once that package has run."""

        def find_spec(self, name, path, target=None):
            if name != 'torch.distributed':
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                init = module.init_process_group

                # tests.gpu_semantics needs the whole of torch, which may be importing still.
                def init_process_group(*args, **kwargs):
                    from tests.gpu_semantics import rules_from_the_start
                    module.init_process_group = init
                    rules_from_the_start()
                    return module.init_process_group(*args, **kwargs)
                module.init_process_group = init_process_group
            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _AfterTorchDistributed())
