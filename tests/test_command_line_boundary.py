"""Only irtbox/cli and irtbox/ops/commands.py know the command line: no other module of the
package names a script of tools/, quotes an option of an irtbox command, names a command in a
message, or starts irtbox's own command line (``python -m irtbox``). The library's errors carry
the argument at fault (IrtboxError.argument) and the commands word it as an option; the operations
tier starts a run (a rehearsal's phase, a sweep's run) with a command line built in
irtbox.ops.commands, the one module outside cli allowed to."""
import ast
import os
import os.path as osp
import re

from tests.test_layering import PACKAGE, ROOT

# The modules that may name the command line: the commands (and ``python -m irtbox``, which
# runs them) and the one ops module.
COMMAND_LINE_HOMES = ('irtbox/cli/', 'irtbox/__main__.py', 'irtbox/ops/commands.py')


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
    """(path relative to the root, its text) of each module outside the homes and configs."""
    for path, text in sorted(package_source().items()):
        if not path.startswith(COMMAND_LINE_HOMES + ('irtbox/configs/', )):
            yield path, text


def test_the_options_are_found():
    assert {'--work-dir', '--cfg-options', '--out', '--resume', '--input-size'} <= cli_options()


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
def command_line_mentions(source, pattern):
    """'path:line: match' for every line of a package module outside the homes matching
    ``pattern`` (``source``: {path relative to the root: text})."""
    found = []
    for path, text in sorted(source.items()):
        if path.startswith(COMMAND_LINE_HOMES + ('irtbox/configs/', )):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            match = pattern.search(line)
            if match:
                found.append(f'{path}:{number}: {match.group(0)}')
    return found


def package_source():
    source = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith('.py'):
                path = osp.join(folder, name)
                source[osp.relpath(path, ROOT).replace(os.sep, '/')] = open(path).read()
    return source


def boundary_pattern():
    options = sorted(cli_options(), key=len, reverse=True)
    return re.compile(r'tools/|-m[\'",\s]+irtbox\b|(?<![\w-])('
                      + '|'.join(map(re.escape, options)) + r')(?![\w-])')


def test_no_module_outside_the_homes_names_the_command_line():
    found = command_line_mentions(package_source(), boundary_pattern())
    assert not found, ('the library names the command line (raise an ArgumentError naming '
                       'the argument, irtbox.cli words it as an option; a run the operations '
                       'tier starts is built in irtbox.ops.commands):\n' + '\n'.join(found))


def test_the_check_sees_a_command_line_started_elsewhere():
    pattern = boundary_pattern()
    started = {'irtbox/ops/sweeps/execute.py': "subprocess.run([sys.executable, '-m', 'irtbox'])",
               'irtbox/ops/rehearse.py': "args = ['train', cfg, '--work-dir', d]",
               'irtbox/ops/commands.py': "[sys.executable, '-m', 'irtbox', '--resume']"}
    assert command_line_mentions(started, pattern) == [
        "irtbox/ops/rehearse.py:1: --work-dir",
        "irtbox/ops/sweeps/execute.py:1: -m', 'irtbox"]
