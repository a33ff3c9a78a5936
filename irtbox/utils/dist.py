"""Process groups for CPU-only (gloo) as well as GPU (nccl) jobs, the device rule, gathers.
MMEngine's ``init_dist`` assumes CUDA and its DDP wrapper passes ``device_ids=[local_rank]``; both
fail on CPU-only machines, and the second also where each task sees one GPU."""
import contextlib
import datetime
import inspect
import logging
import os
import socket
import subprocess
import sys
from typing import Iterator, List, Optional, Union

import torch
import torch.distributed as dist
from mmengine import dist as mmdist
from mmengine.registry import MODEL_WRAPPERS

from .cpus import job_port, local_world_size
from .errors import IrtboxError
from .exit_status import exit_with_parent

__all__ = ['resolve_device', 'free_port', 'init_distributed', 'finish_distributed',
           'adapt_cfg_to_device', 'ddp_wrapper_cfg', 'host_group', 'rows_per_rank',
           'all_gather_cat', 'gather_round_robin', 'PeerFailed', 'fail_together']

def resolve_device(device: Union[str, torch.device, None] = None) -> torch.device:
    """The one device rule: ``device`` as given, else this rank's GPU when torch sees one,
    else the CPU. ``'cuda'`` gets this rank's index: left without one, torch and faiss take
    GPU 0, another rank's."""
    if device is None:
        device = 'cuda' if torch.cuda.is_available() else 'cpu'
    device = torch.device(device)
    if device.type == 'cuda' and device.index is None:
        return torch.device('cuda', torch.cuda.current_device())
    return device


def init_distributed(launcher: str, backend: str = None, port: int = None,
                     timeout: Union[int, float, datetime.timedelta, None] = None,
                     **kwargs) -> None:
    """Initialise ``torch.distributed`` for ``launcher`` in {'pytorch', 'slurm'}.

    ``pytorch``: the environment ``torchrun`` sets. ``slurm``: SLURM_PROCID / SLURM_NTASKS /
    SLURM_LOCALID, the first host of the step's node list (SLURM_STEP_NODELIST, else the
    job's) as master, on MASTER_PORT, else ``port``, else :func:`job_port`.

    With CUDA, the rank's device is LOCAL_RANK modulo the visible GPUs, and nccl is told it
    (``device_id``: torch would otherwise guess rank modulo count, another rank's GPU where
    ranks are not laid out in blocks).

    The other arguments are a config's ``env_cfg.dist_cfg``, read as MMEngine's ``init_dist``
    reads it: ``backend`` (default nccl with CUDA, gloo without), ``timeout`` (seconds or a
    timedelta), any other ``init_process_group`` argument passed on."""
    if dist.is_available() and dist.is_initialized():
        return
    if timeout is not None:
        kwargs['timeout'] = _as_timedelta(timeout)
    if launcher == 'slurm':
        _slurm_env(port)
    elif launcher == 'pytorch':
        exit_with_parent()  # torchrun started this rank: end with it
    else:
        raise ValueError(f'unknown launcher {launcher!r}; expected none, pytorch or slurm')
    for key in ('RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT'):
        if key not in os.environ:
            raise RuntimeError(f'launcher {launcher!r}: environment variable {key} is not set; '
                               'start the job with torchrun or srun.')
    cuda = torch.cuda.is_available()
    backend = backend or ('nccl' if cuda else 'gloo')
    if cuda:
        device = torch.device('cuda', int(os.environ.get('LOCAL_RANK', 0))
                              % torch.cuda.device_count())
        torch.cuda.set_device(device)
        if 'nccl' in backend and 'device_id' in inspect.signature(
                dist.distributed_c10d.init_process_group).parameters:  # torch >= 2.3
            kwargs.setdefault('device_id', device)
    dist.init_process_group(backend=backend, **kwargs)


def _as_timedelta(timeout) -> datetime.timedelta:
    """``dist_cfg.timeout`` (seconds or a timedelta) as a timedelta."""
    if isinstance(timeout, datetime.timedelta):
        return timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f'env_cfg.dist_cfg.timeout must be a positive number of seconds, got '
                        f'{timeout!r}; e.g. dist_cfg=dict(timeout=1800)')
    return datetime.timedelta(seconds=timeout)


def free_port(host: str = '127.0.0.1') -> int:
    """A TCP port free on ``host`` now, for a launcher's rendezvous (``PORT`` of the
    ``dist_*.sh`` tools) when several jobs share a machine."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def finish_distributed() -> bool:
    """End a finished job's process group (a barrier, then destroyed, logs flushed); returns
    whether there was one. Call it last, then ``os._exit(0)``: DDP still holds the gloo group
    and tearing its threads down at interpreter exit sometimes aborts a finished rank."""
    if not (dist.is_available() and dist.is_initialized()):
        return False
    dist.barrier()
    dist.destroy_process_group()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    return True


def _slurm_env(port: int = None) -> None:
    env = os.environ
    rank, world = int(env['SLURM_PROCID']), int(env['SLURM_NTASKS'])
    if 'MASTER_ADDR' not in env:  # the step's first node: a step may run on part of the job's
        nodes = (env.get('SLURM_STEP_NODELIST') or env.get('SLURM_JOB_NODELIST')
                 or env['SLURM_NODELIST'])
        status, out = subprocess.getstatusoutput(f'scontrol show hostnames {nodes}')
        if status != 0 or not out.split():
            raise RuntimeError(f'launcher slurm: `scontrol show hostnames {nodes}` failed '
                               f'({out.strip() or f"exit status {status}"}); set MASTER_ADDR')
        env['MASTER_ADDR'] = out.split()[0]
    env.setdefault('MASTER_PORT', str(port or job_port(env) or 29500))
    env.update(WORLD_SIZE=str(world), LOCAL_RANK=env.get('SLURM_LOCALID', '0'), RANK=str(rank))
    # What torchrun sets and Slurm does not: the ranks on this node, which share its cores.
    os.environ.setdefault('LOCAL_WORLD_SIZE', str(local_world_size()))


def adapt_cfg_to_device(cfg) -> None:
    """Without CUDA: the gloo backend (a config's ``dist_cfg`` names nccl)."""
    if not torch.cuda.is_available():
        env_cfg = dict(cfg.get('env_cfg') or {})
        env_cfg['dist_cfg'] = dict(env_cfg.get('dist_cfg') or {}, backend='gloo')
        cfg['env_cfg'] = env_cfg


def ddp_wrapper_cfg(model_wrapper_cfg=None, find_unused_parameters: bool = False) -> dict:
    """The DDP wrapper's config from a config's ``model_wrapper_cfg`` (None: MMEngine's
    ``MMDistributedDataParallel``), the defaults it leaves filled in:

    - ``device_ids``: the current CUDA device, or None on the CPU (MMEngine's
      ``[LOCAL_RANK]`` names a missing device where each task sees only its own GPU);
    - buffers not re-sent from rank 0 at every step: a cross-batch memory is identical on
      every rank already, and BatchNorm statistics are averaged by ``sync_norm_stats``."""
    wrapper = dict(model_wrapper_cfg or dict(type='MMDistributedDataParallel'))
    wrapper.setdefault('type', 'MMDistributedDataParallel')
    wrapper_type = wrapper['type']
    if isinstance(wrapper_type, str):
        wrapper_type = MODEL_WRAPPERS.get(wrapper_type)
    if not (isinstance(wrapper_type, type)
            and issubclass(wrapper_type, torch.nn.parallel.DistributedDataParallel)):
        return wrapper  # another wrapper (FSDP, ...): its own arguments
    wrapper.setdefault('device_ids', [torch.cuda.current_device()]
                       if torch.cuda.is_available() else None)
    if 'broadcast_buffers' not in wrapper and 'forward_sync_buffers' not in wrapper:
        key = ('forward_sync_buffers' if 'forward_sync_buffers' in
               inspect.signature(torch.nn.parallel.DistributedDataParallel).parameters
               else 'broadcast_buffers')
        wrapper[key] = False
    if find_unused_parameters:
        wrapper.setdefault('find_unused_parameters', True)
    return wrapper


def host_group():
    """A gloo group of every rank, for what the hosts hold (row counts, flags): exchanged
    without the device's stream, so nobody waits for the GPU to read the result. The default
    group itself where it is gloo; else made at the first call, with the default group's
    timeout (every rank calls it at the same point, as any collective)."""
    world = dist.group.WORLD
    if dist.get_backend() == 'gloo':
        return world
    if _HOST_GROUP[0] is not world:  # none yet, or one of an earlier, destroyed default group
        _HOST_GROUP[:] = [world, dist.new_group(backend='gloo', timeout=_timeout_of(world))]
    return _HOST_GROUP[1]


_HOST_GROUP: list = [None, None]  # [the default group, its host group]


def _timeout_of(group) -> Optional[datetime.timedelta]:
    """``group``'s timeout (None, the default, where torch does not say)."""
    try:
        return group._get_backend(torch.device('cuda')).options._timeout
    except (AttributeError, RuntimeError):
        return None


def rows_per_rank(rows: int) -> List[int]:
    """Every rank's ``rows`` (a host-side number, e.g. ``len(tensor)``), in rank order,
    exchanged between the hosts (:func:`host_group`): gathering a length on the device and
    reading it would wait for the GPU at every call."""
    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(mmdist.get_world_size())]
    dist.all_gather(sizes, torch.tensor([rows]), group=host_group())
    return torch.cat(sizes).tolist()


def _all_gather_parts(tensor: torch.Tensor, sizes: List[int]) -> List[torch.Tensor]:
    """Every rank's ``tensor`` (``sizes[r]`` rows on rank r), in rank order; all_gather needs
    equal shapes, so each is padded to the largest and cut back."""
    if len(set(sizes)) == 1:
        return mmdist.all_gather(tensor)
    padded = tensor.new_zeros((max(sizes), ) + tuple(tensor.shape[1:]))
    padded[:len(tensor)] = tensor
    return [g[:k].to(tensor.device) for g, k in zip(mmdist.all_gather(padded), sizes)]


def all_gather_cat(*tensors: torch.Tensor, sizes: Optional[List[int]] = None) -> tuple:
    """Concatenate each tensor (n_r x ..., n_r may differ between ranks) over all ranks, in
    rank order, on every rank. ``sizes``: every rank's n_r when the caller has them
    (:func:`rows_per_rank`), else exchanged here between the hosts; no value is read back
    from the device."""
    if mmdist.get_world_size() == 1:
        return tensors
    sizes = rows_per_rank(len(tensors[0])) if sizes is None else sizes
    return tuple(torch.cat(_all_gather_parts(t, sizes)) for t in tensors)


def gather_round_robin(local: torch.Tensor, n: int) -> torch.Tensor:
    """The ``n`` rows of a set sharded round robin (rank r holds rows r, r + world, ...,
    then padding, dropped), in set order, on every rank."""
    world = mmdist.get_world_size()
    if world == 1:
        return local[:n]
    parts = _all_gather_parts(local, rows_per_rank(len(local)))
    out = local.new_empty((world * max(len(p) for p in parts), ) + tuple(local.shape[1:]))
    for rank, part in enumerate(parts):
        out[rank:rank + world * len(part):world] = part
    return out[:n]


class PeerFailed(IrtboxError, RuntimeError):
    """Another rank failed where the ranks meet (:func:`fail_together`); the message names
    that rank and its error."""


@contextlib.contextmanager
def fail_together(what: str) -> Iterator[None]:
    """Run the block on this rank, then tell every rank whether it raised on any (one small
    gather of each rank's error text, or None), before the collective that follows it.

    Work that may fail on some ranks only (rank 0's compute while the others wait in a
    broadcast) would otherwise leave the others waiting in that collective until the process
    group's timeout (hours on NCCL; gloo fails at once, so CPU runs hide it). A rank that
    raised raises its own error again; the others raise :class:`PeerFailed` naming the
    first failing rank and its error. Every rank must enter it (a collective)."""
    error: Optional[BaseException] = None
    try:
        yield
    except Exception as err:  # noqa: BLE001 (every error is told to the other ranks)
        error = err
    if mmdist.get_world_size() > 1:
        told = mmdist.all_gather_object(None if error is None else f'{type(error).__name__}: {error}')
        failed = [(rank, text) for rank, text in enumerate(told) if text is not None]
        if failed and error is None:
            rank, text = failed[0]
            raise PeerFailed(f'{what}: rank {rank} failed ({text}); rank '
                             f'{mmdist.get_rank()} stops too')
    if error is not None:
        raise error
