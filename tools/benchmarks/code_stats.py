"""The figures of the package's shape that docs/architecture.md cites: lines (configs aside),
modules and lines per subpackage, the largest functions, imports inside functions outside
``irtbox/cli``, exception classes (and how many derive from ``IrtboxError``), docstring lines.

  python tools/benchmarks/code_stats.py [--root .] [--json]

Reads the source with ``ast`` only (nothing is imported), so it runs on any checkout.
"""
import argparse
import ast
import json
import os
import os.path as osp
from collections import Counter

BUILTIN_EXCEPTIONS = {name for name, value in vars(__builtins__).items()
                      if isinstance(value, type) and issubclass(value, BaseException)} \
    if isinstance(__builtins__, dict) else {
        name for name in dir(__builtins__)
        if isinstance(getattr(__builtins__, name), type)
        and issubclass(getattr(__builtins__, name), BaseException)}


def package_files(root):
    """The ``.py`` files of ``root/irtbox``, ``irtbox/configs`` aside, as repo-relative paths."""
    for folder, dirs, files in os.walk(osp.join(root, 'irtbox')):
        dirs[:] = sorted(d for d in dirs if d != 'configs' or folder != osp.join(root, 'irtbox'))
        for name in sorted(files):
            if name.endswith('.py'):
                yield osp.relpath(osp.join(folder, name), root)


def base_name(node):
    return node.id if isinstance(node, ast.Name) else (
        node.attr if isinstance(node, ast.Attribute) else None)


def stats(root):
    lines, per_package, functions = 0, Counter(), []
    modules_per_package, lazy_imports, docstring_lines = Counter(), Counter(), 0
    classes = {}  # name -> base names
    for path in package_files(root):
        source = open(osp.join(root, path)).read()
        count = source.count('\n')
        lines += count
        parts = path.split(os.sep)
        package = parts[1] if len(parts) > 2 else parts[1][:-3]
        per_package[package] += count
        modules_per_package[package] += 1
        tree = ast.parse(source, path)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
                doc = ast.get_docstring(node, clean=False)
                if doc is not None:
                    docstring_lines += doc.count('\n') + 1
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.end_lineno - node.lineno + 1, f'{path}:{node.lineno} {node.name}'))
                if package != 'cli':
                    for inner in ast.walk(node):
                        if isinstance(inner, ast.ImportFrom) and (
                                inner.level or (inner.module or '').startswith('irtbox')):
                            lazy_imports[path] += 1
                        elif isinstance(inner, ast.Import) and any(
                                a.name.startswith('irtbox') for a in inner.names):
                            lazy_imports[path] += 1
            if isinstance(node, ast.ClassDef):
                classes[node.name] = [base_name(b) for b in node.bases]

    def derives(name, target, seen=()):
        return any(b == target or (b in classes and b not in seen and derives(b, target, seen + (b,)))
                   for b in classes.get(name, ()))

    exceptions = sorted(n for n in classes if any(
        derives(n, e) for e in BUILTIN_EXCEPTIONS | {'IrtboxError'}) or n == 'IrtboxError')
    functions.sort(reverse=True)
    return {
        'lines': lines,
        'docstring_share': round(docstring_lines / lines, 3),
        'subpackages': {p: {'modules': modules_per_package[p], 'lines': per_package[p]}
                        for p in sorted(per_package)},
        'largest_functions': [f'{n} lines {where}' for n, where in functions[:5]],
        'imports_inside_functions_outside_cli': sum(lazy_imports.values()),
        'exception_classes': len(exceptions),
        'exception_classes_without_irtbox_base': sorted(
            n for n in exceptions if n != 'IrtboxError' and not derives(n, 'IrtboxError')),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--root', default='.', help='the checkout to read (default: .)')
    parser.add_argument('--json', action='store_true', help='print JSON instead of text')
    args = parser.parse_args(argv)
    result = stats(args.root)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    for key, value in result.items():
        if isinstance(value, dict):
            print(f'{key}:')
            for name, figures in value.items():
                print(f'  {name:14s} ' + '  '.join(f'{k} {v}' for k, v in figures.items()))
        elif isinstance(value, list):
            print(f'{key}:' + ''.join(f'\n  {v}' for v in value))
        else:
            print(f'{key}: {value}')


if __name__ == '__main__':
    main()
