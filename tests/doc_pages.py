"""The code blocks of a page of docs/, for the tests that run them as written."""
import os.path as osp
import re
from typing import List, Tuple

DOCS = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), 'docs')
_BLOCK = re.compile(r'^```(\w+)\n(.*?)^```', re.S | re.M)


def code_blocks(page: str) -> List[Tuple[str, str]]:
    """(language, text) of each fenced code block of ``docs/<page>``, in order."""
    with open(osp.join(DOCS, page), encoding='utf-8') as f:
        return _BLOCK.findall(f.read())
