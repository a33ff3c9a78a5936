"""Export a retriever as image -> L2-normalised embedding (ONNX or TorchScript), checked
numerically against PyTorch right after export.

The exported graph takes a B x 3 x H x W batch of RGB images, uint8 (or float) in 0-255, and
returns B x D float32 L2-normalised embeddings. Inside: the cast to float, the channel flip when
the network sees BGR, the ``(x - mean) / std`` of the model's input spec (``model.input_spec``),
and ``model.extract_feat`` (multi-scale test scales and learned whitening included).
"""
import contextlib
import copy
import dataclasses
import json
import os
import os.path as osp
import re
import sys
import tempfile
import types
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from timm.layers import to_2tuple

from irtbox.models.input_spec import input_spec_of
from irtbox.models.necks.projection import FittedProjection
from irtbox.registry import DATASETS
from irtbox.utils.checks import check_int
from irtbox.utils.errors import ArgumentError, IrtboxError
from irtbox.utils.fileio import atomic_write, atomic_write_text
from irtbox.utils.image import decode_image

__all__ = ['ExportCheckError', 'EmbeddingExport', 'load_check_images', 'export_onnx',
           'export_torchscript', 'run_exported', 'compare', 'onnx_opset_range',
           'remove_stale_temporaries', 'export_model']

FORMATS = ('onnx', 'torchscript')
MAX_ABS_TOL = 1e-4
MIN_COSINE = 0.99999


class ExportCheckError(IrtboxError, RuntimeError):
    """The exported model does not reproduce the PyTorch model's embeddings."""


class EmbeddingExport(nn.Module):
    """RGB 0-255 images (B x 3 x H x W, uint8 or float) -> B x D L2-normalised embeddings,
    normalised as ``model.input_spec`` says."""

    def __init__(self, model: nn.Module):
        super().__init__()
        spec = input_spec_of(model, 'export')
        self.model = model.eval()
        self.flip_channels = spec.network_order == 'bgr'
        # A preprocessor that does not normalise has no mean/std: (x - 0) / 1.
        mean, std = spec.mean or (0.0,), spec.std or (1.0,)
        self.register_buffer('mean', torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer('std', torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images.float()
        if self.flip_channels:
            x = x.flip(1)
        x = (x - self.mean) / self.std
        return F.normalize(self.model.extract_feat(x), dim=-1)


def _cpu_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` on the CPU: its parameters and buffers copied onto the CPU one at a
    time (a deep copy, then moved, would need the model's size free on its GPU once more)."""
    memo = {}
    for tensor in [*model.parameters(), *model.buffers()]:
        on_cpu = (tensor.detach().cpu() if tensor.is_cuda or tensor.device.type != 'cpu'
                  else tensor.detach().clone())
        memo[id(tensor)] = (nn.Parameter(on_cpu, tensor.requires_grad)
                            if isinstance(tensor, nn.Parameter) else on_cpu)
    return copy.deepcopy(model, memo).cpu()  # .cpu(): any tensor not registered


def load_check_images(cfg, count: int, size: Tuple[int, int]) -> Tuple[torch.Tensor, str]:
    """(count x 3 x H x W uint8 RGB images, where they come from): the config's test images
    resized to ``size`` when the test dataset can be built, else seeded random pixels."""
    from mmengine.registry import DefaultScope
    try:
        with DefaultScope.overwrite_default_scope('irtbox'):
            dataset = DATASETS.build(dict(cfg.test_dataloader.dataset, pipeline=[]))
        paths = [dataset.get_data_info(i)['img_path'] for i in range(min(count, len(dataset)))]
        images = []
        for p in paths:  # decoded as the pipelines decode them
            with open(p, 'rb') as f:
                images.append(decode_image(f.read()))
        if len(images) == count:
            source = (f'{count} test image{"s" if count != 1 else ""} of '
                      f'{cfg.test_dataloader.dataset.get("type")}')
            return _resized(images, size), source
    except Exception:  # noqa: BLE001  (no dataset here: random pixels are the fallback)
        pass
    generator = torch.Generator().manual_seed(0)
    return (torch.randint(0, 256, (count, 3, *size), dtype=torch.uint8, generator=generator),
            'random pixels (the test dataset could not be read)')


def export_onnx(module: nn.Module, example: torch.Tensor, path: str, dynamic_batch: bool,
                dynamic_size: bool, opset: int, dynamo: bool) -> None:
    axes = {**({0: 'batch'} if dynamic_batch else {}),
            **({2: 'height', 3: 'width'} if dynamic_size else {})}
    kwargs = dict(input_names=['images'], output_names=['embeddings'], opset_version=opset)
    if dynamo:
        dims = {i: torch.export.Dim.AUTO for i in axes}
        torch.onnx.export(module, (example,), path, dynamo=True,
                          dynamic_shapes=({**dims},) if dims else None, **kwargs)
    else:
        torch.onnx.export(module, (example,), path, dynamo=False,
                          dynamic_axes={'images': axes, 'embeddings': {0: 'batch'}
                                        if dynamic_batch else {}}, **kwargs)


def export_torchscript(module: nn.Module, example: torch.Tensor, path: str) -> None:
    with torch.no_grad():
        traced = torch.jit.trace(module, (example,), check_trace=False)
    torch.jit.save(traced, path)


def run_exported(path: str, fmt: str, images: torch.Tensor) -> np.ndarray:
    """Embeddings the exported file computes (onnxruntime on the CPU, or torch.jit)."""
    if fmt == 'onnx':
        import onnxruntime
        session = onnxruntime.InferenceSession(path, providers=['CPUExecutionProvider'])
        return session.run(None, {session.get_inputs()[0].name: images.numpy()})[0]
    with torch.no_grad():
        return torch.jit.load(path)(images).numpy()


def compare(expected: np.ndarray, got: np.ndarray) -> Dict[str, float]:
    """Max absolute difference and minimum cosine similarity of two B x D arrays."""
    if expected.shape != got.shape:
        return dict(max_abs=float('inf'), min_cosine=-1.0)
    cos = (expected * got).sum(1) / np.maximum(
        np.linalg.norm(expected, axis=1) * np.linalg.norm(got, axis=1), 1e-12)
    return dict(max_abs=float(np.abs(expected - got).max()), min_cosine=float(cos.min()))


def _resized(images, size: Tuple[int, int]) -> torch.Tensor:
    """H x W x 3 images resized to ``size`` (H, W), as one N x 3 x H x W tensor."""
    import cv2
    batch = np.stack([cv2.resize(i, size[::-1]) for i in images])
    return torch.from_numpy(np.ascontiguousarray(batch.transpose(0, 3, 1, 2)))


def _check_cases(images: torch.Tensor, dynamic_batch: bool, dynamic_size: bool,
                 size: Tuple[int, int]) -> List[Tuple[str, torch.Tensor]]:
    cases = [(f'batch {len(images)} at {size[0]}x{size[1]}', images)]
    if dynamic_batch:
        cases.append((f'batch {max(1, len(images) - 1)}', images[:max(1, len(images) - 1)]))
    if dynamic_size:
        other = (size[0] + 32, size[1] + 16)
        cases.append((f'size {other[0]}x{other[1]}',
                      _resized(images.permute(0, 2, 3, 1).numpy(), other)))
    return cases


def onnx_opset_range(dynamo: bool = False) -> Tuple[int, int]:
    """(lowest, highest) ONNX opset the installed torch exporter writes: tracing (the
    TorchScript-based exporter) or ``dynamo`` (the torch.export-based one)."""
    try:
        from torch.onnx import _constants
        low = _constants.ONNX_MIN_OPSET
        high = (_constants.ONNX_MAX_OPSET if dynamo else
                getattr(_constants, 'ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET',
                        _constants.ONNX_MAX_OPSET))
        return int(low), int(high)
    except (ImportError, AttributeError):  # a torch that moved its constants: a safe range
        return 7, 17


def _stale_patterns(base: str) -> List[re.Pattern]:
    """Names of temporaries an export to ``base`` may leave when killed: atomic_write's
    ``.<base>.<8 random>.tmp<ext>`` for the file and its ``.json``."""
    ext = osp.splitext(base)[1]
    random = r'[a-z0-9_]{8}'
    return [re.compile(re.escape(f'.{base}.') + random + re.escape(f'.tmp{ext}') + '$'),
            re.compile(re.escape(f'.{base}.json.') + random + re.escape('.tmp.json') + '$')]


def remove_stale_temporaries(out: str) -> List[str]:
    """Remove the temporaries a killed export to ``out`` left beside it (see
    :func:`_stale_patterns`); returns the paths removed."""
    folder, base = osp.split(osp.abspath(out))
    try:
        names = os.listdir(folder)
    except OSError:  # no folder yet: nothing stale
        return []
    patterns = _stale_patterns(base)
    removed = []
    for path in (osp.join(folder, n) for n in names if any(p.match(n) for p in patterns)):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
            removed.append(path)
    return removed


def _size_hint(model: nn.Module) -> str:
    """What the first timm-style patch embedding in ``model`` (if any) says of input sizes."""
    patch = next((m for m in model.modules() if hasattr(m, 'patch_size')
                  and hasattr(m, 'img_size')), None)
    if patch is None:
        return ''
    p = to_2tuple(patch.patch_size)
    if patch.img_size is not None and getattr(patch, 'strict_img_size', False):
        h, w = patch.img_size
        return (f'; its position embedding fixes the input at {h}x{w} (patch size {p[0]}x{p[1]}): '
                f'give {h} {w} or leave the size out')
    return f'; use a size that is a multiple of its patch size {p[0]}x{p[1]}'


def _first_line(err: BaseException, limit: int = 300) -> str:
    text = str(err).strip().splitlines()
    return f'{type(err).__name__}: {text[0][:limit] if text else ""}'.rstrip(': ')


def _check_arguments(fmt: str, size: Sequence, batch_size, input_dtype: str, opset,
                     dynamo: bool, dynamic_batch: bool) -> None:
    """One-line errors naming the argument, before anything is built or written."""
    if fmt not in FORMATS:
        raise ValueError(f'format must be one of {FORMATS}, got {fmt!r}')
    if input_dtype not in ('uint8', 'float32'):
        raise ValueError(f"input dtype must be 'uint8' or 'float32', got {input_dtype!r}")
    if (len(size) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                  for v in size)):
        raise ValueError(f'input_size must be a positive height and width, got '
                         f'{" x ".join(map(str, size)) if len(size) else "nothing"}')
    check_int(batch_size, 'batch_size')
    if dynamic_batch and batch_size < 2:
        raise ArgumentError(f'batch_size {batch_size}: a dynamic batch axis is checked at two '
                            'batch sizes (N and N-1), so the check batch needs at least 2 images; '
                            'export with dynamic_batch=False for a file that takes exactly one '
                            'image', 'batch_size')
    if fmt == 'onnx':
        low, high = onnx_opset_range(dynamo)
        if not isinstance(opset, int) or isinstance(opset, bool) or not low <= opset <= high:
            raise ArgumentError(f'opset {opset}: the installed torch {torch.__version__} '
                                f'{"dynamo" if dynamo else "tracing"} ONNX exporter writes '
                                f'opsets {low} to {high} (default 17)', 'opset', opset)


def _onnx_error(err: Exception, opset: int) -> Optional[ValueError]:
    """A one-line ValueError for an exporter failure that the opset explains, else None."""
    try:
        from torch.onnx.errors import UnsupportedOperatorError
    except ImportError:
        return None
    if not isinstance(err, UnsupportedOperatorError):
        return None
    text = str(err).splitlines()[0]
    op = re.search(r"operator '([^']+)'", text)
    needed = re.search(r'added in version (\d+)', text)
    return ArgumentError(f'opset {opset}: the model uses '
                         f'{op.group(1) if op else "an operator"}, which ONNX opset {opset} '
                         'cannot express' + (f'; it needs opset {needed.group(1)} or higher (the '
                                             'default is 17)' if needed else f' ({text[:300]})'),
                         'opset', opset)


@contextlib.contextmanager
def _held_output():
    """Hold what is written to file descriptors 1 and 2 (the TorchScript-based ONNX exporter
    dumps its whole graph to stdout from C++ when an operator fails) and pass it on
    afterwards, unless ``discard`` was set (the failure is then reported in one line)."""
    held = types.SimpleNamespace(discard=False)

    def flush():
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(AttributeError, OSError, ValueError):
                stream.flush()

    with contextlib.ExitStack() as stack:
        saved = []
        flush()
        for fd in (1, 2):
            try:
                copy = os.dup(fd)
            except OSError:  # closed: nothing to hold
                continue
            buffer = stack.enter_context(tempfile.TemporaryFile())
            saved.append((fd, copy, buffer))
            os.dup2(buffer.fileno(), fd)
        try:
            yield held
        finally:
            flush()
            for fd, copy, buffer in saved:
                os.dup2(copy, fd)
                os.close(copy)
                if not held.discard:
                    buffer.seek(0)
                    for chunk in iter(lambda: buffer.read(1 << 16), b''):
                        while chunk:
                            chunk = chunk[os.write(fd, chunk):]


def _check_fitted(model: nn.Module) -> None:
    """A fitted projection (PCA, whitening) that was never fitted is refused by name; the
    size probe would otherwise blame the input size."""
    unfitted = [f'{name} ({type(m).__name__})' for name, m in model.named_modules()
                if isinstance(m, FittedProjection) and not bool(m.fitted)]
    if unfitted:
        raise ValueError(f'{", ".join(unfitted)}: not fitted, so the model has no embedding '
                         'to export; give a checkpoint of a training whose fit hook ran (its '
                         'PCA / whitening is saved in it)')


def export_model(model: nn.Module, fmt: str, out: str, input_size: Optional[Sequence[int]] = None,
                 dynamic_batch: bool = True, dynamic_size: bool = False, batch_size: int = 4,
                 input_dtype: str = 'uint8', opset: int = 17, dynamo: bool = False,
                 log=print) -> Dict:
    """Export ``model`` (from ``init_model``) to ``out`` and check it; returns the report
    also written to ``out + '.json'``. The file appears under ``out`` only if every check
    passes (max-abs <= 1e-4 and cosine >= 0.99999 for each batch/size checked); otherwise
    :class:`ExportCheckError` says which case failed and by how much.

    ``dynamic_batch`` (the default): the file takes any batch size, checked at ``batch_size``
    and ``batch_size - 1`` images; False: exactly ``batch_size`` images. The report's
    ``input.batch`` is ``'dynamic'`` or that number.

    ``input_size`` (H, W) defaults to ``model.input_spec.size``: what the test pipeline gives
    a square image (of ``REFERENCE_SIDE`` pixels where the size follows the image's); the
    report's ``input_spec`` says how images of other shapes are resized.

    The file is written by :func:`irtbox.utils.fileio.atomic_write`; bad arguments are
    ``ValueError``s naming the argument."""
    spec = input_spec_of(model, 'export')
    size = tuple(input_size) if input_size else tuple(spec.size)
    _check_arguments(fmt, size, batch_size, input_dtype, opset, dynamo, dynamic_batch)
    _check_fitted(model)
    if any(t.device.type != 'cpu' or t.is_cuda for t in list(model.parameters())
           + list(model.buffers())):
        # Exported and checked on the CPU, where the check images and onnxruntime are: a
        # GPU model's first forward would fail on the device and read as a size problem.
        model = _cpu_copy(model)
    module = EmbeddingExport(model).eval()
    images, source = load_check_images(model.cfg, batch_size, size)
    cast = (lambda x: x) if input_dtype == 'uint8' else (lambda x: x.float())
    try:
        with torch.no_grad():
            dim = int(module(cast(images[:1])).shape[1])
    except Exception as err:  # noqa: BLE001  (timm asserts on the size / patch grid)
        raise ArgumentError(f'input_size {size[0]}x{size[1]}: the PyTorch model '
                            f'does not accept it ({_first_line(err)}){_size_hint(model)}',
                            'input_size', tuple(size)) from None
    cases = _check_cases(images, dynamic_batch, dynamic_size, size)
    if dynamic_size:
        name, batch = cases[-1]
        try:
            with torch.no_grad():
                module(cast(batch))
        except Exception as err:  # noqa: BLE001  (timm asserts on a fixed image size)
            raise ArgumentError(f'dynamic_size: the PyTorch model itself does not accept '
                                f'the check\'s {name} ({_first_line(err)}); it has a fixed '
                                'input size: export it at that size only',
                                'dynamic_size', True) from None
    for path in remove_stale_temporaries(out):
        log(f'removed {path}, the temporary file of an earlier export to {out} that did not '
            'finish')
    checks = []

    def write(tmp: str) -> None:
        with warnings.catch_warnings():
            # Tracing warns at every shape-dependent branch (timm's size asserts); whether the
            # trace generalises is what the numerical check below establishes, per case.
            warnings.simplefilter('ignore', torch.jit.TracerWarning)
            if fmt == 'onnx':
                with _held_output() as held:
                    try:
                        export_onnx(module, cast(images), tmp, dynamic_batch, dynamic_size,
                                    opset, dynamo)
                    except Exception as err:  # noqa: BLE001  (an operator the opset lacks)
                        clear = _onnx_error(err, opset)
                        if clear is None:
                            raise
                        held.discard = True  # the exporter's dump of its whole graph
                        raise clear from None
            else:
                export_torchscript(module, cast(images), tmp)
        for name, batch in cases:
            with torch.no_grad():
                expected = module(cast(batch)).numpy()
            try:
                got = run_exported(tmp, fmt, cast(batch))
                result = compare(expected, got)
            except Exception as err:  # noqa: BLE001  (the runtime refused this input)
                result = dict(max_abs=float('inf'), min_cosine=-1.0,
                              error=f'{type(err).__name__}: {str(err).splitlines()[0][:300]}')
            result['case'] = name
            checks.append(result)
            log(f'check {name}: max |diff| {result["max_abs"]:.2e}, min cosine '
                f'{result["min_cosine"]:.7f}' + (f' ({result["error"]})' if 'error' in result
                                                 else ''))
        failed = [c for c in checks if not (c['max_abs'] <= MAX_ABS_TOL and
                                            c['min_cosine'] >= MIN_COSINE)]
        if failed:
            hint, fields = '', {}
            if any(c['case'].startswith('size') for c in failed):
                hint = (' The exported graph does not generalise to other input sizes '
                        '(tracing fixed the size); export at the size you serve, without '
                        'dynamic_size.')
                fields = dict(argument='dynamic_size', remedy=dict(dynamo=True)
                              if fmt == 'onnx' and not dynamo else None)
            raise ExportCheckError(
                f'{fmt} export of {getattr(model.cfg, "filename", "the model")} does not match '
                f'PyTorch: ' + '; '.join(f'{c["case"]}: max |diff| {c["max_abs"]:.2e}, min '
                                         f'cosine {c["min_cosine"]:.7f}' for c in failed) +
                f' (limits: {MAX_ABS_TOL:g}, {MIN_COSINE}).{hint} Nothing was written to {out}.',
                **fields)

    atomic_write(out, write)
    report = dict(
        format=fmt, file=osp.basename(out), exporter=('dynamo' if dynamo else 'trace')
        if fmt == 'onnx' else 'torch.jit.trace', opset=opset if fmt == 'onnx' else None,
        input=dict(name='images', layout='NCHW', channels='RGB', dtype=input_dtype,
                   range='0-255', batch='dynamic' if dynamic_batch else batch_size,
                   height=size[0], width=size[1], dynamic_batch=dynamic_batch,
                   dynamic_size=dynamic_size,
                   # The file takes RGB whatever the network sees: a flip is in the graph.
                   flipped_to_network_order_inside=spec.network_order == 'bgr'),
        output=dict(name='embeddings', dim=dim, l2_normalized=True),
        # Less the channel order irtbox's own image loader decodes to (pixel_order), which
        # says nothing of this file's input.
        input_spec={k: v for k, v in dataclasses.asdict(spec).items() if k != 'pixel_order'},
        config=getattr(model.cfg, 'filename', None), checkpoint=getattr(model, 'checkpoint', None),
        check_images=source, checks=checks)
    atomic_write_text(out + '.json', json.dumps(report, indent=2))
    return report
