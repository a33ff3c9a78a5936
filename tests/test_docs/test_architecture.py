"""docs/architecture.md's worked examples run as written (in one fresh process, in order)."""
import os.path as osp
import subprocess
import sys

import pytest

from tests.doc_pages import code_blocks

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def python_blocks():
    return [text for language, text in code_blocks('architecture.md') if language == 'python']


def test_every_adding_section_has_an_example():
    blocks = python_blocks()
    for registered in ('class TinyConvNet', 'class MeanMaxPool', 'class PositivePullLoss',
                       'class ListFileDataset'):
        assert any(registered in b for b in blocks), registered


@pytest.mark.slow
def test_examples_run(tmp_path):
    script = '\n\n'.join(f'exec(compile({block!r}, "docs/architecture.md block {i}", "exec"), {{}})'
                         for i, block in enumerate(python_blocks()))
    (tmp_path / 'examples.py').write_text(script + '\nprint("ok")\n')
    done = subprocess.run([sys.executable, str(tmp_path / 'examples.py')], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith('ok')
