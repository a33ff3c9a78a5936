"""The package declares what it imports: every third-party module imported anywhere under
irtbox/ belongs to a distribution named in requirements/runtime.txt or in one extra; the
configs and the zoo index are package data. (tools/smoke_test_wheel.sh, run by CI, installs
the built wheel in a new environment and uses it from an empty folder.)"""
import ast
import glob
import importlib.metadata
import os.path as osp
import re
import sys

import irtbox

PACKAGE = osp.dirname(irtbox.__file__)
ROOT = osp.dirname(PACKAGE)
# Modules of distributions that may be absent here (an extra the tests do not install).
NOT_INSTALLED = {'umap': 'umap-learn'}


def _normalise(name):
    return re.sub(r'[-_.]+', '-', name).lower()


def _requirements(name):
    with open(osp.join(ROOT, 'requirements', f'{name}.txt')) as f:
        return {_normalise(re.split(r'[<>=!~\[; ]', line.strip())[0]) for line in f
                if line.strip() and not line.startswith('#')}


def _imported_modules():
    found = {}
    for path in glob.glob(osp.join(PACKAGE, '**', '*.py'), recursive=True):
        if osp.join(PACKAGE, 'configs') in path:
            continue
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split('.')[0], osp.relpath(path, ROOT))
    return {m: where for m, where in found.items()
            if m not in sys.stdlib_module_names and m != 'irtbox'}


def test_every_import_is_declared():
    declared = set()
    for name in ('runtime', 'plots', 'umap', 'serve', 'deploy', 'slurm'):
        declared |= _requirements(name)
    distributions = importlib.metadata.packages_distributions()
    undeclared = []
    for module, where in sorted(_imported_modules().items()):
        owners = {_normalise(d) for d in distributions.get(module, [])}
        owners |= {NOT_INSTALLED[module]} if module in NOT_INSTALLED else set()
        assert owners, f'{module} (imported in {where}) is not installed and not known'
        if not owners & declared:
            undeclared.append(f'{module} ({where}; from {", ".join(sorted(owners))})')
    assert not undeclared, f'imported but not in requirements/: {undeclared}'


def test_configs_and_zoo_index_are_package_data():
    assert osp.isfile(osp.join(PACKAGE, 'model-index.yml'))
    assert glob.glob(osp.join(PACKAGE, 'configs', '*', '*.py'))
    # The checkout's names for them are links into the package.
    assert osp.realpath(osp.join(ROOT, 'configs')) == osp.join(PACKAGE, 'configs')
    assert osp.realpath(osp.join(ROOT, 'model-index.yml')) == osp.join(PACKAGE, 'model-index.yml')
    with open(osp.join(ROOT, 'setup.py')) as f:
        setup = f.read()
    for pattern in ("'model-index.yml'", "'configs/**/*.py'", "'configs/**/*.yml'"):
        assert pattern in setup
