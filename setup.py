import os.path as osp
import re

from setuptools import find_packages, setup

HERE = osp.dirname(osp.abspath(__file__))


def read_requirements(name):
    with open(osp.join(HERE, 'requirements', name)) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith(('#', '-'))]


def read_version():  # the one version: irtbox.__version__
    with open(osp.join(HERE, 'irtbox', '__init__.py')) as f:
        return re.search(r"__version__ = '([^']+)'", f.read()).group(1)


# One extra per optional feature (requirements/<name>.txt); irtbox[all] is all of them, the
# tests need all but umap.
EXTRAS = {name: read_requirements(f'{name}.txt')
          for name in ('plots', 'umap', 'serve', 'deploy', 'slurm')}
EXTRAS['umap'] += EXTRAS['plots']


setup(
    name='irtbox',
    version=read_version(),
    description='An MMEngine toolbox for training and evaluating image-retrieval models '
                'with vision transformers (IRT, DToP, the DML recipe benchmark).',
    long_description=open(osp.join(HERE, 'README.md')).read(),
    long_description_content_type='text/markdown',
    packages=find_packages(include=('irtbox', 'irtbox.*')),
    # The shipped configs and the zoo index live inside the package, so that a wheel finds
    # them by name from any folder (a checkout's configs/ and model-index.yml link here).
    package_data={'irtbox': ['model-index.yml', 'configs/**/*.py', 'configs/**/*.yml',
                             'configs/**/*.md', 'search/static/*.html']},
    python_requires='>=3.10',
    install_requires=read_requirements('runtime.txt'),
    extras_require=dict(
        **EXTRAS,
        all=sorted({req for reqs in EXTRAS.values() for req in reqs}),
        tests=read_requirements('tests.txt') + sorted(
            {req for name in ('plots', 'serve', 'deploy', 'slurm') for req in EXTRAS[name]}),
    ),
    entry_points={'console_scripts': ['irtbox = irtbox.cli.main:console']},
    license='Apache-2.0',
    zip_safe=False,
)
