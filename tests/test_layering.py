"""The package imports one way: each subpackage of irtbox imports only from its own layer or
the layers below it, lazy imports inside functions included; the subpackages of one layer
do not import each other in a circle, nor do the modules of one subpackage. The scripts of
tools/ only run the commands of irtbox.cli."""
import ast
import os
import os.path as osp

import pytest

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
PACKAGE = osp.join(ROOT, 'irtbox')
# Top to bottom.
LAYERS = [
    ('cli', ),                                   # the commands: parse arguments, call below
    ('ops', ),                                   # operations: prepare, rehearse, sweep, check
    ('search', ),                                # applications built on the API
    ('apis', 'deployment'),                      # what tools/ and users call
    ('engine', 'visualization'),                 # runner, loops, hooks; result pictures
    ('models', 'datasets', 'evaluation'),        # the parts a config assembles
    ('structures', 'utils', 'registry'),         # shared by all
]
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names}


def modules():
    """(file, its dotted package parts) of every module under irtbox/."""
    for folder, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            if name.endswith('.py'):
                path = osp.join(folder, name)
                parts = osp.relpath(path, ROOT)[:-len('.py')].split(os.sep)
                yield path, parts[:-1]


def imported(path, package):
    """The irtbox modules ``path`` imports anywhere in it (module level or in functions)."""
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                base = '.'.join(package[:len(package) - node.level + 1] + ([base] if base else []))
            # ``from irtbox import ops`` imports irtbox.ops.
            yield from (f'{base}.{alias.name}' for alias in node.names)


def subpackage(module):
    parts = module.split('.')
    return parts[1] if parts[0] == 'irtbox' and len(parts) > 1 else None


def edges():
    """{(importing subpackage, imported subpackage): [file, ...]} across subpackages."""
    found = {}
    for path, package in modules():
        if len(package) < 2:
            continue  # irtbox/__init__.py, irtbox/registry.py
        source = package[1]
        for module in imported(path, package):
            target = subpackage(module)
            if target in LAYER and target != source:
                found.setdefault((source, target), []).append(osp.relpath(path, ROOT))
    return found


def test_every_subpackage_has_a_layer():
    names = {n for n in os.listdir(PACKAGE) if osp.isdir(osp.join(PACKAGE, n))
             and osp.isfile(osp.join(PACKAGE, n, '__init__.py'))}
    assert names | {'registry'} == set(LAYER)


@pytest.mark.slow
def test_no_layer_imports_a_higher_one():
    upward = {f'{s} -> {t}': files for (s, t), files in edges().items()
              if LAYER[t] < LAYER[s]}
    assert not upward, f'imports against the layers {LAYERS}: {upward}'


def test_only_cli_imports_the_operations_tier():
    """irtbox.ops (prepare, miniatures, rehearsals, sweeps, config checking) is imported by
    irtbox.cli and itself only: the library runs without it."""
    found = [osp.relpath(path, ROOT) for path, package in modules()
             if package[1:2] not in (['cli'], ['ops'])
             and any(subpackage(m) == 'ops' for m in imported(path, package))]
    assert not found, f'modules outside irtbox/cli importing irtbox.ops: {found}'


def test_registry_imports_no_subpackage():
    path = osp.join(PACKAGE, 'registry.py')
    assert not [m for m in imported(path, ['irtbox']) if subpackage(m)]


@pytest.mark.slow
@pytest.mark.parametrize('layer', LAYERS)
def test_no_circle_within_a_layer(layer):
    graph = {}
    for (s, t), _ in edges().items():
        if s in layer and t in layer:
            graph.setdefault(s, set()).add(t)

    def reaches(start, goal, seen=()):
        return any(n == goal or (n not in seen and reaches(n, goal, seen + (n, )))
                   for n in graph.get(start, ()))

    assert not [s for s in layer if reaches(s, s)], graph


def module_imports():
    """{module: {module of the same subpackage it imports, at module level or in a
    function}}, packages' ``__init__`` aside (importing any module runs its package's
    ``__init__`` first, so an edge to it says nothing about the module's own design)."""
    names = {}
    for path, package in modules():
        name = '.'.join(package + [osp.basename(path)[:-len('.py')]])
        if not name.endswith('.__init__'):
            names[name] = path
    graph = {}
    for name, path in names.items():
        package = name.split('.')[:-1]
        for module in imported(path, package):
            parts = module.split('.')
            # ``from .x import f`` names irtbox.pkg.x.f: the module is the longest known prefix.
            target = next(('.'.join(parts[:n]) for n in range(len(parts), 1, -1)
                           if '.'.join(parts[:n]) in names), None)
            if target and target != name and subpackage(target) == subpackage(name):
                graph.setdefault(name, set()).add(target)
    return graph


def test_no_circle_between_modules_of_a_subpackage():
    graph = module_imports()

    def path_back(start):
        """A chain of imports from ``start`` back to it, or None."""
        stack, seen = [(start, (start, ))], set()
        while stack:
            node, chain = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    return chain + (start, )
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, chain + (nxt, )))
        return None

    circles = {' -> '.join(c) for c in map(path_back, graph) if c}
    assert not circles, f'modules importing each other in a circle: {sorted(circles)}'


def test_the_circle_check_sees_function_level_imports(tmp_path, monkeypatch):
    """Two modules of a made-up subpackage, one importing the other inside a function: the
    check finds the circle."""
    package = tmp_path / 'irtbox' / 'apis'
    package.mkdir(parents=True)
    (package / '__init__.py').write_text('')
    (package / 'a.py').write_text('from .b import g\n')
    (package / 'b.py').write_text('def g():\n    from irtbox.apis.a import f\n')
    monkeypatch.setitem(globals(), 'ROOT', str(tmp_path))
    monkeypatch.setitem(globals(), 'PACKAGE', str(tmp_path / 'irtbox'))
    assert module_imports() == {'irtbox.apis.a': {'irtbox.apis.b'},
                                'irtbox.apis.b': {'irtbox.apis.a'}}


def test_scripts_only_run_a_command():
    """tools/*.py (benchmarks and the quick start aside) hold no logic: each runs one command
    of irtbox.cli, whose main the tests import."""
    tools = osp.join(ROOT, 'tools')
    scripts = [osp.join(folder, name) for folder, _, files in os.walk(tools) for name in files
               if name.endswith('.py') and 'benchmarks' not in folder
               and name != 'quickstart_digits.py']
    assert len(scripts) >= 15
    for path in scripts:
        code = [line for line in open(path).read().splitlines()[1:] if line.strip()]
        assert code[0] == 'from irtbox.cli import run', path
        assert code[1].startswith('from irtbox.cli.') and code[1].endswith(' import main'), path
        assert code[2:] == ["if __name__ == '__main__':", '    run(main)'], path


def test_the_library_imports_irtbox_at_the_top_of_its_modules():
    """docs/architecture.md: outside irtbox/cli (which imports inside ``main`` for start-up
    time), no function imports an irtbox module: the import graph is the one the top of each
    file shows."""
    inside = []
    for path, package in modules():
        if package[1:2] == ['cli']:
            continue
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if (isinstance(inner, ast.ImportFrom) and (
                            inner.level or (inner.module or '').startswith('irtbox'))) or (
                            isinstance(inner, ast.Import)
                            and any(a.name.startswith('irtbox') for a in inner.names)):
                        inside.append(f'{osp.relpath(path, ROOT)}:{inner.lineno}')
    assert not inside, inside
