"""Helpers of the fault-injection tests: paths and the logs of tiny runs."""
import glob
import os.path as osp

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY_CONFIG = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')


def run_log(work_dir: str) -> str:
    """Everything the runs in ``work_dir`` logged (MMEngine's <timestamp>/<timestamp>.log)."""
    text = ''
    for path in sorted(glob.glob(osp.join(work_dir, '*', '*.log'))):
        with open(path) as f:
            text += f.read()
    return text
