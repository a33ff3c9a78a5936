"""What the benchmark scripts share: one contender per process, one report."""
import json
import subprocess
import sys
from typing import List, Optional

from .fileio import atomic_write_text

__all__ = ['run_contender', 'write_report']


def run_contender(command: List[str], name: str) -> dict:
    """Run ``command`` (a fresh process for one contender) and return the JSON object it prints
    last; a failing contender is an error that shows its stderr."""
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f'contender {name} failed:\n{out.stderr[-3000:]}')
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_report(table: str, rows: List[dict], json_path: Optional[str] = None,
                 md_path: Optional[str] = None, **extra) -> None:
    """Print the markdown ``table``; write it to ``md_path`` and the rows, with the command
    line and ``extra`` fields (e.g. the machine's load), to ``json_path`` when given."""
    print(table)
    if json_path:
        atomic_write_text(json_path, json.dumps(dict(command=' '.join(sys.argv), **extra,
                                                     rows=rows), indent=1))
    if md_path:
        atomic_write_text(md_path, table + '\n')
