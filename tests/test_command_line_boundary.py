"""Only irtbox/cli knows the command line: no other module of the package names a script of
tools/, quotes an option of an irtbox command or, in its messages, a command (the library's
errors carry the argument at fault, IrtboxError.argument, and the commands word it as an
option; its hints name functions)."""
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


def library_modules():
    """(path relative to the root, its text) of each module outside irtbox/cli and configs."""
    for folder, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            path = osp.relpath(osp.join(folder, name), ROOT).replace(os.sep, '/')
            if name.endswith('.py') and not path.startswith(
                    ('irtbox/cli/', 'irtbox/configs/') + tuple(ALLOWED)):
                yield path, open(osp.join(ROOT, path)).read()


def test_the_options_are_found():
    assert {'--work-dir', '--cfg-options', '--out', '--resume', '--input-size'} <= cli_options()


def test_no_module_outside_cli_names_a_script_or_an_option():
    options = sorted(cli_options(), key=len, reverse=True)
    pattern = re.compile(r'tools/|(?<![\w-])(' + '|'.join(map(re.escape, options))
                         + r')(?![\w-])')
    found = [f'{path}:{number}: {match.group(0)}' for path, text in library_modules()
             for number, line in enumerate(text.splitlines(), 1)
             for match in [pattern.search(line)] if match]
    assert not found, ('the library names the command line (raise an ArgumentError naming '
                       'the argument; irtbox.cli words it as an option):\n' + '\n'.join(found))


def test_no_message_of_the_library_names_a_command():
    from irtbox.cli.main import COMMANDS
    # `irtbox check NAME` in a message (an HTML title, >irtbox search results<, is no command).
    pattern = re.compile(r'(?<!>)\birtbox (' + '|'.join(map(re.escape, COMMANDS))
                         + r')\b|-m irtbox')
    found = []
    for path, text in library_modules():
        tree = ast.parse(text)
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                           ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        found += [f'{path}:{node.lineno}: {node.value[:60]!r}' for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and id(node) not in docstrings and pattern.search(node.value)]
    assert not found, ('a message of the library names a command (name the function or the '
                       'argument; irtbox.cli words the command):\n' + '\n'.join(found))
