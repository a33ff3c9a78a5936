"""Whether the installed torch and torchvision are a pair, read from the packages' metadata
(nothing is imported). A torchvision built for another torch fails deep in an import
(``RuntimeError: operator torchvision::nms does not exist``); :func:`irtbox.cli.run` adds the
pair to install to such an error. torch 2.x pairs with torchvision 0.(x+15), from the same
build (the local version: ``+cpu``, ``+cu130``, or none for PyPI's)."""
import re
import traceback
from importlib import metadata
from typing import Dict, Optional

__all__ = ['installed_versions', 'torch_pair_problem', 'version_hint']

_PACKAGES = ('torch', 'torchvision', 'timm', 'mmengine')
_VERSION = re.compile(r'(\d+)\.(\d+)\.(\d+)[^+]*(?:\+(.*))?')


def installed_versions() -> Dict[str, str]:
    """{package: version} of torch, torchvision, timm and mmengine, those installed."""
    found = {}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def torch_pair_problem(versions: Optional[Dict[str, str]] = None) -> Optional[str]:
    """What is wrong with ``versions``' (default: the installed) torch and torchvision as a
    pair, and the pair to install together; None when they are one (or unknown)."""
    versions = installed_versions() if versions is None else versions
    torch, vision = (_VERSION.match(versions.get(k, '')) for k in ('torch', 'torchvision'))
    if not torch or not vision or torch.group(1) != '2':
        return None
    minor, build = int(torch.group(2)), torch.group(4)
    if int(vision.group(2)) == minor + 15 and vision.group(4) == build:
        return None
    index = (f' --index-url https://download.pytorch.org/whl/{build}' if build else '')
    return (f"torch {versions['torch']} and torchvision {versions['torchvision']} are not a "
            f'pair (torch 2.{minor} pairs with torchvision 0.{minor + 15}, of the same build); '
            f'install them together: pip install torch=={torch.group(0).split("+")[0]} '
            f'torchvision==0.{minor + 15}.*{index}')


def version_hint(error: BaseException) -> str:
    """For an error raised inside torchvision, timm or mmengine: the torch pair to install
    (:func:`torch_pair_problem`), else for an ImportError or AttributeError the versions that
    met there; '' for other errors."""
    frames = traceback.extract_tb(error.__traceback__)
    packages = {name for frame in frames for name in ('torchvision', 'timm', 'mmengine')
                if re.search(rf'[/\\]{name}[/\\]', frame.filename)}
    text = str(error)
    if 'torchvision::' in text:
        packages.add('torchvision')
    if not packages:
        return ''
    versions = installed_versions()
    pair = torch_pair_problem(versions)
    if pair:
        return pair
    if not isinstance(error, (ImportError, AttributeError)):  # what a version skew raises
        return ''
    met = ', '.join(f'{name} {versions[name]}' for name in sorted(packages) if name in versions)
    return (f'raised inside {met} under torch {versions.get("torch", "?")}: if these '
            'versions do not go together, install torch, torchvision and that package in one '
            'pip command (e.g. pip install --upgrade torch torchvision timm mmengine)')
