"""GPU semantics on the CPU: the CUDA and NCCL rules that code touching devices must obey,
simulated so that CI (which never has a GPU) fails when code breaks them.

- :class:`FakeCuda`: ``count`` visible devices, one of them current, each with its own
  generator state. An ordinal past the visible ones is "invalid device ordinal", as on a
  task that sees only its own GPU (``srun --gpus-per-task=1``); generator states must be
  CPU byte tensors.
- :class:`DeviceTensor` / :func:`on_device`: a checkpoint as loaded onto a GPU. Such a
  tensor refuses ``.numpy()`` and the CPU generator until ``.cpu()`` is called.
- :func:`host_reads`: every operation that makes the host wait for a device tensor (a
  read of its value, ``.cpu()``, ``torch.unique``, ``nonzero``, mask indexing), each with
  the line that made it: code run at every iteration should make none, or few and known.
- :func:`nccl_rules`: ``torch.distributed`` with the NCCL rules a CPU run can check (no
  point-to-point, tensors on the group's device, every rank issuing the same collective of
  the same shape). It is on in every process group the tests start
  (:func:`rules_from_the_start`: ``tests/conftest.py`` for forked ranks, the ``sitecustomize``
  of ``tests/gpu_semantics_site`` for the others, through :func:`rank_env`).
"""
import contextlib
import os
import os.path as osp
import sys
import weakref
from typing import Iterator, List

import torch
from torch.overrides import TorchFunctionMode

__all__ = ['FakeCuda', 'DeviceTensor', 'as_gpu_model', 'on_device', 'cpu_generator_rules',
           'host_reads', 'HostRead', 'nccl_rules', 'NcclRuleBroken', 'rules_from_the_start', 'rank_env', 'ENV_FLAG',
           'WAIT_VAR']

#: The environment variable that turns :func:`nccl_rules` on in a rank (see :func:`rank_env`).
ENV_FLAG = 'IRTBOX_TEST_NCCL_RULES'
_SITE_DIR = osp.join(osp.dirname(osp.abspath(__file__)), 'gpu_semantics_site')


class FakeCuda:
    """CUDA with ``count`` visible devices and ``current`` the current one, on the CPU.

    Patches (through pytest's ``monkeypatch``) what irtbox asks of ``torch.cuda``:
    availability, the device count and the current device, ``set_device``, and the
    generators (``get_rng_state`` / ``set_rng_state`` and their ``_all`` forms, which
    torch defines as a loop over the visible devices by index, as here). ``states[i]`` is
    device i's generator state.
    """

    def __init__(self, monkeypatch, count: int = 1, current: int = 0):
        self.count, self.current = count, current
        self.states: List[torch.Tensor] = [
            torch.full((16, ), 100 + i, dtype=torch.uint8) for i in range(count)]
        cuda = torch.cuda
        for name, value in dict(
                is_available=lambda: True, is_initialized=lambda: True,
                device_count=lambda: self.count, current_device=lambda: self.current,
                set_device=self.set_device, get_rng_state=self.get_rng_state,
                set_rng_state=self.set_rng_state, get_rng_state_all=self.get_rng_state_all,
                set_rng_state_all=self.set_rng_state_all).items():
            monkeypatch.setattr(cuda, name, value)
            if hasattr(cuda.random, name):
                monkeypatch.setattr(cuda.random, name, value)

    def _ordinal(self, device) -> int:
        if device is None or device == 'cuda':
            return self.current
        if isinstance(device, str):
            device = torch.device(device)
        if isinstance(device, torch.device):
            device = self.current if device.index is None else device.index
        if not 0 <= device < self.count:
            raise RuntimeError(f'CUDA error: invalid device ordinal (device {device}, '
                               f'{self.count} visible)')
        return device

    def set_device(self, device) -> None:
        self.current = self._ordinal(device)

    def get_rng_state(self, device='cuda') -> torch.Tensor:
        return self.states[self._ordinal(device)].clone()

    def set_rng_state(self, new_state, device='cuda') -> None:
        if isinstance(new_state, DeviceTensor) or new_state.device.type != 'cpu' \
                or new_state.dtype != torch.uint8:
            raise TypeError('RNG state must be a torch.ByteTensor')
        self.states[self._ordinal(device)] = new_state.clone()

    def get_rng_state_all(self) -> List[torch.Tensor]:
        return [self.get_rng_state(i) for i in range(self.count)]

    def set_rng_state_all(self, new_states) -> None:
        for i, state in enumerate(new_states):
            self.set_rng_state(state, i)


class DeviceTensor(torch.Tensor):
    """A tensor as it is on a GPU, where that matters on the CPU: ``.numpy()`` refuses and
    so do the CPU generators (with :class:`FakeCuda` or :func:`cpu_generator_rules`);
    ``is_cuda`` is True; ``.cpu()`` gives a plain CPU tensor."""

    @property
    def is_cuda(self):
        return True

    def numpy(self, *args, **kwargs):
        raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to "
                        'copy the tensor to host memory first.')

    def cpu(self, *args, **kwargs):
        return torch.Tensor.cpu(self, *args, **kwargs).as_subclass(torch.Tensor)

    def new_empty(self, *args, **kwargs):  # what deepcopy uses
        return torch.Tensor.new_empty(self, *args, **kwargs).as_subclass(DeviceTensor)


def as_gpu_model(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with its parameters and buffers :class:`DeviceTensor`\\ s, as after
    ``model.cuda()`` where that matters on the CPU (``is_cuda``, ``.numpy()``)."""
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is not None:
                module._parameters[name] = torch.nn.Parameter(
                    param.detach().as_subclass(DeviceTensor), requires_grad=param.requires_grad)
        for name, buffer in list(module._buffers.items()):
            if buffer is not None:
                module._buffers[name] = buffer.as_subclass(DeviceTensor)
    return model


def _map_tensors(obj, fn):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return type(obj)((k, _map_tensors(v, fn)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tensors(v, fn) for v in obj)
    return obj


def on_device(obj):
    """``obj`` (a checkpoint, a state) with every tensor a :class:`DeviceTensor`: what
    ``torch.load(map_location='cuda')`` gives on a GPU machine."""
    return _map_tensors(obj, lambda t: t.as_subclass(DeviceTensor))


@contextlib.contextmanager
def cpu_generator_rules() -> Iterator[None]:
    """``torch.set_rng_state`` refusing a :class:`DeviceTensor`, as it refuses a CUDA
    tensor."""
    original = torch.set_rng_state

    def set_rng_state(new_state):
        if isinstance(new_state, DeviceTensor):
            raise TypeError('RNG state must be a torch.ByteTensor')
        return original(new_state)

    torch.set_rng_state = set_rng_state
    try:
        yield
    finally:
        torch.set_rng_state = original


# Ops whose result (or its shape) the host must wait for when their tensor is on a GPU.
_READS = {'item', 'tolist', 'cpu', 'numpy', '__bool__', '__int__', '__float__', '__index__',
          'unique', 'unique_consecutive', 'nonzero', 'argwhere', 'masked_select', 'repeat_interleave'}
# Factories: with no device given they make a host tensor on a GPU machine too.
_FACTORIES = {'tensor', 'as_tensor', 'from_numpy', 'zeros', 'ones', 'empty', 'full', 'arange',
              'linspace', 'rand', 'randn', 'randint', 'randperm', 'eye', 'new_tensor'}


class HostRead(str):
    """One entry of :func:`host_reads`' log: equal to ``'read'``; ``op`` the operation and
    ``where`` the ``file:line`` of the code that made it."""

    def __new__(cls, op: str, where: str):
        read = super().__new__(cls, 'read')
        read.op, read.where = op, where
        return read


def _masked(index) -> bool:
    """Whether an indexing argument holds a boolean mask (its selection's size is data)."""
    items = index if isinstance(index, (tuple, list)) else (index, )
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


def _caller() -> str:
    """``file:line`` of the innermost frame outside torch and this module."""
    frame = sys._getframe(2)
    while frame is not None and (frame.f_code.co_filename.startswith(_TORCH_DIR)
                                 or frame.f_code.co_filename == __file__):
        frame = frame.f_back
    return '?' if frame is None else f'{frame.f_code.co_filename}:{frame.f_lineno}'


_TORCH_DIR = osp.dirname(torch.__file__)


class _HostReads(TorchFunctionMode):
    """Records the reads of :func:`host_reads`, telling host tensors from device ones."""

    def __init__(self, log: List[str]):
        super().__init__()
        self.log = log
        # Tensors a GPU run would also hold on the host, by id (a WeakSet compares tensors
        # with ==), each dropped when its tensor is.
        self.host = {}

    def _on_device(self, tensor) -> bool:
        if not isinstance(tensor, torch.Tensor):
            return False
        ref = self.host.get(id(tensor))
        return tensor.is_cuda or ref is None or ref() is not tensor

    def _keep_on_host(self, tensor) -> None:
        key = id(tensor)
        self.host[key] = weakref.ref(tensor, lambda _: self.host.pop(key, None))

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, '__name__', '')
        first = args[0] if args else None
        if self._on_device(first) and (
                name in _READS or (name in ('__getitem__', '__setitem__', 'index_put',
                                            'index_put_') and _masked(args[1]))
                or (name == 'where' and len(args) == 1)):
            self.log.append(HostRead(name, _caller()))
        out = func(*args, **kwargs)
        # (a result that is its input, as .cpu() of a CPU tensor, keeps what it was)
        if isinstance(out, torch.Tensor) and out is not first and not out.is_cuda \
                and self._made_on_host(name, args, kwargs):
            self._keep_on_host(out)
        return out

    def _made_on_host(self, name, args, kwargs) -> bool:
        tensors = [t for a in list(args) + list(kwargs.values())
                   for t in (a if isinstance(a, (list, tuple)) else (a, ))
                   if isinstance(t, torch.Tensor)]
        if name in ('cpu', 'numpy') or (name in _FACTORIES and 'device' not in kwargs
                                         and name != 'new_tensor'):
            return True
        if name == 'to' or name.endswith('_like') or name.startswith('new_'):
            # .to(x.device) cannot be told from no move on the CPU: the source decides
            return bool(tensors) and not self._on_device(tensors[0])
        return bool(tensors) and not any(self._on_device(t) for t in tensors)


@contextlib.contextmanager
def host_reads(log: List[str] = None) -> Iterator[List[str]]:
    """Record every operation that makes the host wait for a device tensor's value or size:
    ``bool()``, ``int()``, ``float()``, ``.item()``, ``.tolist()``, ``.cpu()``, ``.numpy()``,
    ``torch.unique``, ``nonzero``, ``masked_select``, boolean-mask indexing and writes (a
    ``TorchFunctionMode``, in this thread). On a GPU each one waits for the work queued before
    it, so code run at every iteration should make none, or few and known.

    What a GPU run would hold on the host is not counted: tensors made by factories without a
    device (``torch.tensor([n])``), by ``.cpu()``, or computed from such tensors only; every
    other tensor (the model's, the batch's, anything made before) counts as on the device. A
    host tensor moved with ``.to(x.device)`` stays a host tensor here, and ``.cpu()`` of a
    tensor is that tensor (the CPU cannot tell either from no move). Yields the list it
    appends each read to (a :class:`HostRead`, equal to ``'read'``; or ``log``, shared with
    other recorders, for the order of events)."""
    log = [] if log is None else log
    with _HostReads(log):
        yield log


_COLLECTIVES = ('all_reduce', 'all_gather', 'all_gather_into_tensor', 'broadcast', 'reduce',
                'reduce_scatter', 'reduce_scatter_tensor', 'gather', 'scatter', 'all_to_all',
                'all_to_all_single', 'all_gather_object', 'broadcast_object_list',
                'gather_object', 'barrier')
_POINT_TO_POINT = ('send', 'recv', 'isend', 'irecv', 'batch_isend_irecv')


_UNSHAPED = ('all_to_all', 'all_to_all_single')  # ranks may send different shapes
#: The environment variable with the seconds a rank waits, before a collective, for the other
#: ranks to issue theirs (default 300): past it the collective fails instead of hanging.
WAIT_VAR = 'IRTBOX_TEST_COLLECTIVE_WAIT'


class NcclRuleBroken(RuntimeError):
    """What NCCL would refuse, or do at a cost that gloo does not show, was asked of
    ``torch.distributed``."""


_SIDE: list = [None, None]  # [the default group, the gloo group the ranks compare on]


def _side_group():
    """The gloo group of every rank that :func:`nccl_rules` compares the ranks' collectives
    on, made once per default group (every rank calls it at the same point), or None
    without a process group."""
    import datetime

    import torch.distributed as dist
    if not dist.is_initialized():
        return None
    if _SIDE[0] is not dist.group.WORLD:
        seconds = float(os.environ.get(WAIT_VAR, 300))
        _SIDE[:] = [dist.group.WORLD, dist.new_group(
            backend='gloo', timeout=datetime.timedelta(seconds=seconds))]
    return _SIDE[1]


def _described(name, args, kwargs) -> str:
    """What the ranks must agree on: the collective, and the shape and dtype of its first
    tensor (the input, or the output every rank holds alike)."""
    first = next((a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)),
                 None)
    if first is None or name in _UNSHAPED:
        return name
    return f'{name} of a {tuple(first.shape)} {str(first.dtype).replace("torch.", "")} tensor'


def _agree(gather_object, side, described: str) -> None:
    """Compare ``described`` with every rank's (over ``side``); NcclRuleBroken naming the
    first rank that differs, or when the others do not issue a collective in time."""
    import torch.distributed as dist
    rank, world = dist.get_rank(), dist.get_world_size()
    told = [None] * world
    try:
        with torch._C.DisableTorchFunction():  # the check's own reads are not the code's
            gather_object(told, described, group=side)
    except RuntimeError as error:
        raise NcclRuleBroken(
            f'rank {rank} issued {described}; not every rank issued a collective within '
            f'{os.environ.get(WAIT_VAR, 300)} s ({WAIT_VAR}) or a rank has left: on NCCL a '
            f'hang until the process group\'s timeout ({" ".join(str(error).split())[:200]})'
        ) from None
    other = next((r for r in range(world) if told[r] != described), None)
    if other is not None:
        raise NcclRuleBroken(f'rank {rank} issued {described} while rank {other} issued '
                             f'{told[other]}: on NCCL the ranks would hang or exchange garbage')


@contextlib.contextmanager
def nccl_rules() -> Iterator[List[str]]:
    """``torch.distributed`` with the rules of NCCL that a CPU run can check, on gloo:

    - point-to-point ``send`` / ``recv`` (and their async forms) are refused: NCCL builds
      a communicator for each pair of ranks that uses them (GPU memory and start-up time on
      every device); collectives of the main process group are what irtbox uses;
    - a collective given a tensor on another device than the one the process group
      communicates on (``mmengine.dist.get_comm_device()``) is refused;
    - before each collective of the default group the ranks compare it (its name, and the
      shape and dtype of its tensor) over a side gloo group: one that differs fails on every
      rank, naming the rank that differs (on NCCL: a hang, or garbage received); a collective
      that the other ranks do not issue within :data:`WAIT_VAR` seconds, or after a rank has
      left, fails instead of waiting for the process group's timeout.

    That NCCL takes CUDA tensors only cannot be told apart on a CPU, where every tensor
    is a CPU tensor: the device a collective's buffers are made on is checked by unit
    tests with :class:`FakeCuda`. Yields the names of the collectives called, in order.
    """
    import torch.distributed as dist
    from mmengine.dist import get_comm_device
    called: List[str] = []
    saved = []
    gather_object = dist.all_gather_object
    _side_group()  # made now, where every rank enters: later, ranks may be in different places

    def checked(name, function):
        def wrapper(*args, **kwargs):
            tensors = [a for a in list(args) + list(kwargs.values())
                       if isinstance(a, torch.Tensor)]
            device = get_comm_device()
            for tensor in tensors:
                if tensor.device != device:
                    raise NcclRuleBroken(f'torch.distributed.{name} was given a tensor on '
                                         f'{tensor.device}; the group communicates on {device}')
            group = kwargs.get('group', next((a for a in args
                                              if isinstance(a, dist.ProcessGroup)), None))
            side = _side_group()
            if side is not None and group in (None, dist.group.WORLD):
                _agree(gather_object, side, _described(name, args, kwargs))
            called.append(name)
            return function(*args, **kwargs)
        return wrapper

    def refused(name):
        def wrapper(*args, **kwargs):
            raise NcclRuleBroken(
                f'torch.distributed.{name}: point-to-point on NCCL builds a communicator for '
                'each pair of ranks (memory and start-up time on every GPU); use a collective '
                'of the main process group')
        return wrapper

    try:
        for names, make in ((_COLLECTIVES, checked), (_POINT_TO_POINT, refused)):
            for name in names:
                if hasattr(dist, name):
                    saved.append((name, getattr(dist, name)))
                    setattr(dist, name, make(name, getattr(dist, name)) if make is checked
                            else make(name))
        yield called
    finally:
        for name, value in reversed(saved):
            setattr(dist, name, value)


def rules_from_the_start() -> None:
    """Turn :func:`nccl_rules` on in this process, and in the ranks it forks, from the moment
    a process group starts (``init_process_group`` made to enter it), for the process's whole
    life; idempotent. ``tests/conftest.py`` calls it in the test process, the
    ``sitecustomize`` of ``tests/gpu_semantics_site`` in every process started with
    :data:`ENV_FLAG` (spawned, forkserver and subprocess ranks)."""
    import torch.distributed as dist
    if getattr(dist.init_process_group, '_with_rules', False):
        return
    init = dist.init_process_group

    def init_process_group(*args, **kwargs):
        out = init(*args, **kwargs)
        if not _RULES:
            _RULES.append(nccl_rules())
            _RULES[0].__enter__()  # held: a context manager that is collected exits
        else:
            _side_group()  # a new default group: its side group, made where every rank is
        return out
    destroy = dist.destroy_process_group

    def destroy_process_group(*args, **kwargs):
        if not args and kwargs.get('group') is None:  # the default group: its side group too
            _SIDE[:] = [None, None]  # a gloo group left alive would hang the ranks forked later
        return destroy(*args, **kwargs)
    init_process_group._with_rules = True
    dist.init_process_group = init_process_group
    dist.destroy_process_group = destroy_process_group


_RULES: list = []


def rank_env(env: dict = None) -> dict:
    """``env`` (default: this process's) for a process started by a test, with
    :func:`nccl_rules` on from its process group's start: it imports ``sitecustomize`` from
    ``tests/gpu_semantics_site``, which calls :func:`rules_from_the_start` when
    :data:`ENV_FLAG` is set."""
    env = dict(os.environ if env is None else env)
    env[ENV_FLAG] = '1'
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in (_SITE_DIR, osp.dirname(osp.dirname(osp.abspath(__file__))),
                    env.get('PYTHONPATH')) if p)
    return env
