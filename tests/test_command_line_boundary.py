"""Only irtbox/cli knows the command line: no other module of the package names a script of
tools/ or quotes an option of an irtbox command (the library raises errors naming its
arguments, irtbox.utils.errors.ArgumentError, and the commands word them as options)."""
import ast
import os
import os.path as osp
import re

from tests.test_layering import PACKAGE, ROOT

# Not moved yet: each entry names who moves it. Empty it as they do.
ALLOWED = {}


def cli_options():
    """Every option an irtbox command declares (the ``'--x'`` strings of irtbox/cli)."""
    options = set()
    folder = osp.join(PACKAGE, 'cli')
    for name in os.listdir(folder):
        if name.endswith('.py'):
            tree = ast.parse(open(osp.join(folder, name)).read())
            options |= {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
                        and isinstance(node.value, str)
                        and re.fullmatch(r'--[a-z][a-z0-9-]*', node.value)}
    return options


def test_the_options_are_found():
    assert {'--work-dir', '--cfg-options', '--out', '--resume', '--input-size'} <= cli_options()


def test_no_module_outside_cli_names_a_script_or_an_option():
    options = sorted(cli_options(), key=len, reverse=True)
    pattern = re.compile(r'tools/|(?<![\w-])(' + '|'.join(map(re.escape, options))
                         + r')(?![\w-])')
    found = []
    for folder, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            path = osp.relpath(osp.join(folder, name), ROOT).replace(os.sep, '/')
            if not name.endswith('.py') or path.startswith(('irtbox/cli/', 'irtbox/configs/')) \
                    or path.startswith(tuple(ALLOWED)):
                continue
            for number, line in enumerate(open(osp.join(ROOT, path)), 1):
                match = pattern.search(line)
                if match:
                    found.append(f'{path}:{number}: {match.group(0)}')
    assert not found, ('the library names the command line (raise an ArgumentError naming '
                       'the argument; irtbox.cli words it as an option):\n' + '\n'.join(found))
