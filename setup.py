import os.path as osp
import re

from setuptools import find_packages, setup

HERE = osp.dirname(osp.abspath(__file__))


def read_requirements(name):
    with open(osp.join(HERE, 'requirements', name)) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith(('#', '-'))]


def read_version():
    with open(osp.join(HERE, 'irtbox', '__init__.py')) as f:
        return re.search(r"__version__ = '([^']+)'", f.read()).group(1)


setup(
    name='irtbox',
    version=read_version(),
    description='An MMEngine toolbox for training and evaluating image-retrieval models '
                'with vision transformers (IRT, DToP, the DML recipe benchmark).',
    long_description=open(osp.join(HERE, 'README.md')).read(),
    long_description_content_type='text/markdown',
    packages=find_packages(exclude=('configs', 'tools', 'tests', 'work_dirs', 'data')),
    package_data={'irtbox.search': ['static/*.html']},
    python_requires='>=3.10',
    install_requires=read_requirements('runtime.txt'),
    extras_require=dict(
        optional=read_requirements('optional.txt'),
        serve=read_requirements('serve.txt'),
        deploy=read_requirements('deploy.txt'),
        tests=read_requirements('tests.txt'),
        umap=['umap-learn'],  # tools/analysis_tools/plot_embeddings.py --method umap
        all=read_requirements('optional.txt') + read_requirements('serve.txt') +
        read_requirements('deploy.txt') + read_requirements('tests.txt'),
    ),
    entry_points={'console_scripts': ['irtbox = irtbox.cli.main:console']},
    license='Apache-2.0',
    zip_safe=False,
)
