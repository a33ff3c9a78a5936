"""Helpers of the fault-injection tests: paths, the logs of tiny runs, process trees."""
import glob
import os
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


def descendants(pid: int) -> list:
    """Every process below ``pid`` (from /proc; Linux), children before their own."""
    found = []
    try:
        tasks = os.listdir(f'/proc/{pid}/task')
    except FileNotFoundError:
        return found
    for task in tasks:
        try:
            with open(f'/proc/{pid}/task/{task}/children') as f:
                children = [int(c) for c in f.read().split()]
        except FileNotFoundError:
            continue
        for child in children:
            found += [child] + descendants(child)
    return found
