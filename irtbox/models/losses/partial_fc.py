"""Partial FC: a class-centre matrix sharded across ranks, with sampled negative centres.

An, Zhu et al., ICCVW 2021 / CVPR 2022. Used by every irtbox loss with one centre per class
(:class:`~.class_weights.ClassWeightLoss`) given ``partial_fc=dict(sample_rate=...)``; when and
why: docs/methods/dtop.md, "Many classes: Partial FC". One step on each of the W ranks:

1. Rank r holds rows ``[start_r, stop_r)`` of the C x D centres (:func:`shard_range`).
2. Embeddings (with gradient, :class:`_AllGatherWithGrad`) and labels of all ranks are gathered.
3. :func:`sample_classes` draws, in the global class space from a generator seeded by
   ``(seed, step)`` alone (same sample at any world size), every label of the batch plus
   uniform others up to ``ceil(sample_rate * C)``; each rank uses the part in its rows.
4. Rank r computes its N x k_r logits; :class:`_ShardedCrossEntropy` all-reduces the row max,
   exp-sum and target logit, giving the cross-entropy of the whole N x k softmax.
5. Backward: the embeddings' gradient is summed across ranks and each rank keeps its rows
   **multiplied by W**, since DDP averages the backbone's gradients. The centres stay out of
   DDP: nothing of size C x D is communicated per step.

Checkpoints hold the whole C x D matrix and its optimizer state under the replicated layer's
key (:class:`irtbox.engine.hooks.partial_fc.PartialFCHook` gathers and cuts them).
"""
import math
from typing import Callable, List, Optional, Tuple

import torch
import torch.distributed as dist
from mmengine import dist as mmdist
from torch import Tensor

from irtbox.utils.checks import check_int
from irtbox.utils.dist import all_gather_cat, rows_per_rank
from .cosine import cosine_to_classes

__all__ = ['check_partial_fc', 'shard_range', 'shard_sizes', 'init_shard', 'step_generator',
           'sample_classes', 'partial_fc_loss', 'gather_rows', 'sharded_layers',
           'whole_state_dict']

# Rows drawn per generator in init_shard: each block of rows has its own seed, so a rank
# draws only the blocks it holds and the matrix is the same for every world size.
_INIT_BLOCK = 4096
_KEYS = ('sample_rate', 'seed')


def check_partial_fc(cfg, owner: str) -> Optional[dict]:
    """``partial_fc`` of a loss as ``dict(sample_rate=float, seed=int or None)``, or None
    when not given; a ValueError naming ``owner`` and the key at fault otherwise."""
    if cfg is None:
        return None
    if not isinstance(cfg, dict):
        raise ValueError(f'{owner}: partial_fc must be a dict such as '
                         f'dict(sample_rate=0.1) or None, got {cfg!r}')
    unknown = sorted(set(cfg) - set(_KEYS))
    if unknown:
        raise ValueError(f'{owner}: partial_fc has unknown key(s) {unknown}; it takes '
                         f'{", ".join(_KEYS)}')
    rate = cfg.get('sample_rate', 1.0)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 1:
        raise ValueError(f'{owner}: partial_fc.sample_rate must be a number in (0, 1] '
                         f'(the fraction of the class centres each step uses), got {rate!r}')
    seed = check_int(cfg.get('seed'), f'{owner}: partial_fc.seed', 0, allow_none=True)
    return dict(sample_rate=float(rate), seed=seed)


def shard_range(num_classes: int, world_size: int, rank: int) -> Tuple[int, int]:
    """Rows ``[start, stop)`` of rank ``rank``: C split into ``world_size`` contiguous parts
    whose sizes differ by at most one, the larger first (as ``torch.tensor_split``)."""
    base, extra = divmod(num_classes, world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (rank < extra)


def shard_sizes(num_classes: int, world_size: int) -> List[int]:
    """Every rank's number of rows (:func:`shard_range`), in rank order."""
    return [stop - start for start, stop in
            (shard_range(num_classes, world_size, r) for r in range(world_size))]


def init_shard(start: int, stop: int, embed_dim: int, seed: int) -> Tensor:
    """Rows ``[start, stop)`` of a C x D matrix drawn uniformly in ±1/√D (as
    ``nn.Linear``), block by block of rows, each block from its own generator seeded by
    ``(seed, block)``: the whole matrix is the same whichever ranks hold which rows, and no
    rank draws more than its rows plus two partial blocks."""
    bound = 1 / math.sqrt(embed_dim)
    out = torch.empty(stop - start, embed_dim)
    for block in range(start // _INIT_BLOCK, (stop - 1) // _INIT_BLOCK + 1 if stop > start else 0):
        lo, hi = block * _INIT_BLOCK, (block + 1) * _INIT_BLOCK
        generator = torch.Generator().manual_seed(_mix(seed, block))
        rows = torch.empty(_INIT_BLOCK, embed_dim).uniform_(-bound, bound, generator=generator)
        a, b = max(lo, start), min(hi, stop)
        out[a - start:b - start] = rows[a - lo:b - lo]
    return out


def _mix(*values: int) -> int:
    """One 63-bit seed from several integers (a multiplicative hash, deterministic)."""
    h = 0x9E3779B97F4A7C15
    for v in values:
        h = ((h ^ (int(v) & 0xFFFFFFFFFFFFFFFF)) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h & 0x7FFFFFFFFFFFFFFF


def step_generator(seed: int, step: int, call: int = 0) -> torch.Generator:
    """The CPU generator of one forward pass: seeded by the layer's seed, the training
    iteration and the call within it (several calls per iteration under gradient
    accumulation), nothing rank- or device-dependent."""
    return torch.Generator().manual_seed(_mix(seed, step, call))


def sample_classes(labels: Tensor, num_classes: int, sample_rate: float,
                   generator: torch.Generator) -> Optional[Tensor]:
    """The classes one step uses: every class in ``labels`` (the gathered batch's) plus
    classes drawn uniformly without replacement from the others, ``max(P, ceil(sample_rate
    * C))`` in all (P the number of distinct labels), as sorted indices on the labels'
    device. None when that is every class.

    The draw is the top k of C uniform float64 scores from ``generator`` (a CPU generator:
    the same on every device; float32 scores of a million classes would tie) with the
    positives' set above 1, so it depends on the generator and the labels only.
    """
    k = math.ceil(sample_rate * num_classes)
    if k < len(labels):  # P may exceed k: count them (a host read: P sets a shape)
        k = max(k, len(torch.unique(labels)))
    k = min(num_classes, k)  # else P <= len(labels) <= k, known without reading the labels
    if k >= num_classes:
        return None
    scores = torch.rand(num_classes, generator=generator, dtype=torch.float64)
    scores = scores.to(labels.device)
    scores[labels] = 2.0
    return torch.topk(scores, k, sorted=False).indices.sort().values


class _AllGatherWithGrad(torch.autograd.Function):
    """Every rank's embeddings and labels, concatenated in rank order; backward sums the
    embeddings' gradient over the ranks and returns this rank's rows times the world size
    (see the module docstring)."""

    @staticmethod
    def forward(ctx, x: Tensor, labels: Tensor) -> Tuple[Tensor, Tensor]:
        rank = mmdist.get_rank()
        sizes = rows_per_rank(len(x))  # known on the host: this rank's rows are a slice
        x, labels = all_gather_cat(x.detach(), labels, sizes=sizes)
        ctx.mine = slice(sum(sizes[:rank]), sum(sizes[:rank + 1]))
        ctx.world = len(sizes)
        ctx.mark_non_differentiable(labels)
        return x, labels

    @staticmethod
    def backward(ctx, grad: Tensor, _):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad)
        return grad[ctx.mine] * ctx.world, None


class _ShardedCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of N rows whose logits are split by columns across ranks.

    ``logits``: N x k_r, this rank's columns; ``target``: N, the column of each row's
    target on this rank, -1 where another rank holds it. Forward: the row max (all-reduced
    MAX), the exp-sum (all-reduced SUM) and the target logit (all-reduced SUM of the one
    rank's value) give loss_i = max_i + log Σ exp(z_ij - max_i) - z_i,target, as
    ``F.cross_entropy`` on the whole row. Backward: (softmax - one-hot) / N on this rank's
    columns."""

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor) -> Tensor:
        world = mmdist.get_world_size()
        n = len(logits)
        if logits.shape[1]:
            row_max = logits.detach().max(dim=1).values
        else:  # no sampled centre on this rank this step
            row_max = logits.new_full((n, ), -math.inf)
        if world > 1:
            dist.all_reduce(row_max, op=dist.ReduceOp.MAX)
        probs = (logits - row_max[:, None]).exp_()
        total = probs.sum(dim=1)
        # Each row's target column where this rank holds it, column 0 (unused) elsewhere:
        # gathers and scatters of fixed shape, where selecting the rows would read a count.
        here, cols = _target_columns(target, logits.shape[1])
        # The exp-sums and the target logits (each on one rank, 0 elsewhere): one all-reduce.
        sums = logits.new_zeros(2, n)
        sums[0] = total
        if cols is not None:
            sums[1] = torch.where(here, logits.detach().gather(1, cols).squeeze(1), 0.0)
        if world > 1:
            dist.all_reduce(sums)
        total, target_logit = sums[0], sums[1]
        probs.div_(total[:, None])
        ctx.save_for_backward(probs, here, cols)
        return (row_max + total.log() - target_logit).mean()

    @staticmethod
    def backward(ctx, grad: Tensor):
        probs, here, cols = ctx.saved_tensors
        out = probs.clone()
        if cols is not None:  # -1 at the targets held here (adding -0.0 elsewhere changes nothing)
            out.scatter_add_(1, cols, -here.to(out.dtype)[:, None])
        out.mul_(grad / len(probs))
        return out, None


def _target_columns(target: Tensor, width: int) -> Tuple[Tensor, Optional[Tensor]]:
    """(rows whose target this rank holds, N x 1 columns: the target's there, 0 elsewhere);
    the columns are None when this rank has no column at all."""
    here = target >= 0
    return here, (target.clamp(min=0)[:, None] if width else None)


def partial_fc_loss(embeddings: Tensor, labels: Tensor, shard: Tensor, shard_start: int,
                    num_classes: int, target_logit: Callable[[Tensor], Tensor], scale: float,
                    sample_rate: float = 1.0,
                    generator: Optional[torch.Generator] = None) -> Tensor:
    """Margin-softmax cross-entropy with the centres sharded across the ranks of the
    default process group (one process: unsharded), mean over the gathered batch.

    logits_ij = scale·cos θ_ij for the sampled classes j ≠ y_i and scale·target_logit(cos θ_iy) for
    the target, θ_ij the angle between embedding i and centre j (:func:`.cosine.cosine_to_classes`).

    Args:
        embeddings (Tensor): this rank's B_r x D.
        labels (Tensor): this rank's B_r class indices in [0, C).
        shard (Tensor): this rank's rows ``[shard_start, shard_start + C_r)`` of the C x D centres.
        num_classes (int): C.
        target_logit (callable): cos θ of the targets -> their logits before the scale.
        scale (float): s.
        sample_rate (float): fraction of the classes each step uses (1.0: all).
        generator (torch.Generator): the step's generator (:func:`step_generator`),
            the same on every rank; needed when ``sample_rate < 1``.

    Returns:
        Tensor: scalar, the same on every rank: the loss of the gathered batch.
    """
    x, y = embeddings, labels
    if mmdist.get_world_size() > 1:
        x, y = _AllGatherWithGrad.apply(embeddings, labels)
    stop = shard_start + len(shard)
    local = None
    if sample_rate < 1.0:
        if generator is None:
            raise ValueError('partial_fc_loss: sample_rate < 1 needs the step\'s generator')
        sample = sample_classes(y, num_classes, sample_rate, generator)
        if sample is not None:
            # The sample is sorted: this rank's part is a slice, whose bounds (one host read
            # of two numbers) set the shape of its logits.
            lo, hi = torch.searchsorted(sample, sample.new_tensor([shard_start, stop])).tolist()
            local = sample[lo:hi] - shard_start
    here = (y >= shard_start) & (y < stop)
    if local is None:
        weights = shard
        target = torch.where(here, y - shard_start, -1)
    else:
        weights = shard.index_select(0, local)
        # The sample holds every label of the batch, so each held here is found.
        target = torch.where(here, torch.searchsorted(local, y - shard_start), -1)
    cos = cosine_to_classes(x, weights)
    here, cols = _target_columns(target, cos.shape[1])
    if cols is None:
        return _ShardedCrossEntropy.apply(cos * scale, target)
    # The targets' logits put in place, the other rows' column 0 put back as it was.
    picked = cos.gather(1, cols)
    logits = cos.scatter(1, cols, torch.where(here[:, None], target_logit(picked), picked))
    return _ShardedCrossEntropy.apply(logits.mul_(scale), target)


def gather_rows(local: Tensor, sizes: List[int]) -> Optional[Tensor]:
    """On rank 0: every rank's rows (rank r holds ``sizes[r]``) concatenated on the CPU;
    None on the other ranks (a collective: every rank calls it).

    One broadcast per rank, so a rank holds one shard on its device at a time, and no
    point-to-point ``send`` / ``recv`` (NCCL would build a communicator per pair of ranks)."""
    rank, world = mmdist.get_dist_info()
    local = local.detach().contiguous()
    if world == 1:
        return local.cpu().clone()
    out = None
    if rank == 0:
        out = torch.empty((sum(sizes), ) + tuple(local.shape[1:]), dtype=local.dtype)
    start = 0
    for src in range(world):
        buffer = local if src == rank else local.new_empty((sizes[src], ) + tuple(local.shape[1:]))
        dist.broadcast(buffer, src=src)
        if out is not None:
            out[start:start + sizes[src]] = buffer.cpu()
        start += sizes[src]
    return out


def sharded_layers(model: torch.nn.Module) -> List[Tuple[str, torch.nn.Module]]:
    """(qualified name, module) of every layer in ``model`` whose class centres are
    sharded (a :class:`~.class_weights.ClassWeightLoss` with ``partial_fc``)."""
    return [(name, module) for name, module in model.named_modules()
            if getattr(module, 'partial_fc', None) is not None
            and hasattr(module, 'shard_start')]


def whole_state_dict(model: torch.nn.Module) -> dict:
    """``model.state_dict()`` with the rows of every sharded layer gathered from all ranks
    into the whole C x D matrix, on every rank (a collective: every rank calls it). For
    checks that compare the ranks' models (the rehearsal), which would otherwise see each
    rank's own rows; the C x D matrix is held on every rank, so it is meant for small models.
    """
    state = model.state_dict()
    for name, layer in sharded_layers(model):
        key = f'{name}.class_weights'
        if key not in state or layer.world_size == 1:
            continue
        state[key] = all_gather_cat(layer.class_weights.detach())[0]
    return state
