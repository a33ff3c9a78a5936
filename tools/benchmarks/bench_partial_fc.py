"""The class-centre layer of an ArcFace training step: replicated on every rank (as DDP trains
it) against Partial FC (sharded, every centre or a sampled fraction), each contender in its own
group of processes.

  python tools/benchmarks/bench_partial_fc.py [--classes 81313 250000 1000000] [--dim 1536]
      [--batch 32] [--world 2] [--rates 1.0 0.1] [--iters 6] [--warmup 2]
      [--max-total-gb 12] [--json out.json] [--md out.md]

For every class count, the contenders are ``replicated`` (``ArcFaceLoss`` with the whole C x D
matrix on each rank; after the backward its gradient is all-reduced and averaged, which is what
DDP does with it) and ``partial_fc r`` for each ``--rates`` r (``ArcFaceLoss(partial_fc=
dict(sample_rate=r))``: rank k holds C / W rows, the embeddings are gathered, the softmax is
reduced across ranks, nothing of size C x D is communicated). Each contender is one
``torchrun`` of ``--world`` CPU processes (gloo; on a machine with CUDA, NCCL with one GPU per
rank), started afresh.

One step = what the class layer costs a training step: the loss of a batch of ``--batch``
random unit embeddings per rank (the backbone's output, a leaf here), the backward (the
embeddings' gradient included), the all-reduce (replicated only) and an SGD step with momentum
0.9 on the centres. Reported, the largest over the ranks:

- ``layer MB / rank``: the centres, their gradient and the optimizer's state for them (bytes of
  the tensors), the memory the issue targets (partial FC: <= 1 / W of replicated);
- ``s / step``: mean wall time of the timed steps (after ``--warmup``), each started after a
  barrier;
- ``extra peak RSS``: the process's peak resident memory over what it held before the layer
  was built (logits, softmax, gathered batches and allocator slack included).

A contender whose layer memory over all ranks would exceed ``--max-total-gb`` is not run (its
row gives the memory it would need): on a shared machine, a layer that does not fit must not
push other processes out of memory.
"""
import argparse
import json
import os
import os.path as osp
import subprocess
import sys
import time

from irtbox.utils.benchmark import run_contender, write_report

BYTES = 4  # float32


def layer_bytes(classes: int, dim: int, world: int, sharded: bool) -> int:
    """Centres + gradient + SGD momentum of one rank (the largest shard)."""
    rows = -(-classes // world) if sharded else classes
    return 3 * rows * dim * BYTES


def child(args):
    import torch
    import torch.distributed as dist

    from irtbox.models.losses import ArcFaceLoss
    from irtbox.utils.memory import peak_rss_mb, reset_peak

    cuda = torch.cuda.is_available()
    dist.init_process_group('nccl' if cuda else 'gloo')
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device('cuda', int(os.environ.get('LOCAL_RANK', 0))) if cuda else 'cpu'
    if cuda:
        torch.cuda.set_device(device)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    sharded = args.child != 'replicated'
    base = reset_peak()
    torch.manual_seed(0)
    partial_fc = dict(sample_rate=float(args.child), seed=0) if sharded else None
    classes = args.classes[0]
    layer = ArcFaceLoss(classes, args.dim, partial_fc=partial_fc).to(device)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(1000 + rank)
    times = []
    for step in range(args.iters):
        x = torch.nn.functional.normalize(torch.randn(args.batch, args.dim, generator=g), dim=1)
        x = x.to(device).requires_grad_()
        y = torch.randint(0, classes, (args.batch, ), generator=g).to(device)
        if sharded:
            layer.set_sample_step(step)
        dist.barrier()
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        layer(x, y).backward()
        if not sharded and world > 1:  # what DDP does with a replicated parameter
            dist.all_reduce(layer.class_weights.grad)
            layer.class_weights.grad.div_(world)
        optimizer.step()
        optimizer.zero_grad()
        if cuda:
            torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    param = layer.class_weights
    state = optimizer.state[param]
    memory = param.numel() * param.element_size() * 2 + sum(  # the gradient is param-sized
        t.numel() * t.element_size() for t in state.values() if isinstance(t, torch.Tensor))
    mine = dict(per_step=sum(times) / len(times), layer_mb=memory / 2**20,
                extra_peak_mb=peak_rss_mb() - base,
                gpu_peak_mb=torch.cuda.max_memory_allocated() / 2**20 if cuda else None)
    everyone = [None] * world
    dist.all_gather_object(everyone, mine)
    dist.destroy_process_group()
    if rank == 0:
        row = {key: max(r[key] for r in everyone) if mine[key] is not None else None
               for key in mine}
        row.update(contender=args.child, classes=classes, dim=args.dim, batch=args.batch,
                   world=world, device='cuda' if cuda else 'cpu', timed=len(times))
        print(json.dumps(row))


def launch(args, classes, contender):
    """One contender: ``torchrun`` of ``--world`` fresh processes."""
    from irtbox.utils.dist import free_port
    command = [sys.executable, '-m', 'torch.distributed.run', f'--nproc_per_node={args.world}',
               f'--master_port={free_port()}', osp.abspath(__file__), '--child', contender,
               '--classes', str(classes), '--dim', str(args.dim), '--batch', str(args.batch),
               '--iters', str(args.iters), '--warmup', str(args.warmup)]
    return run_contender(command, f'{contender} at {classes} classes')


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--classes', type=int, nargs='+', default=[81313, 250000, 1000000])
    parser.add_argument('--dim', type=int, default=1536, help='embedding size D')
    parser.add_argument('--batch', type=int, default=32, help='embeddings per rank and step')
    parser.add_argument('--world', type=int, default=2, help='processes per contender')
    parser.add_argument('--rates', type=float, nargs='+', default=[1.0, 0.1],
                        help='the sample rates of the partial FC contenders')
    parser.add_argument('--iters', type=int, default=6, help='steps in all')
    parser.add_argument('--warmup', type=int, default=2, help='untimed first steps')
    parser.add_argument('--max-total-gb', type=float, default=12.0,
                        help='skip a contender whose layer memory over all ranks is larger')
    parser.add_argument('--json', help='write the results here')
    parser.add_argument('--md', help='write the markdown table here')
    parser.add_argument('--child', help=argparse.SUPPRESS)  # one rank of one contender
    args = parser.parse_args()
    if args.iters <= args.warmup or args.world < 1 or args.batch < 1 \
            or not all(0 < r <= 1 for r in args.rates):
        parser.error('need --iters > --warmup, --world >= 1, --batch >= 1 and every --rates '
                     'in (0, 1]')
    if args.child:
        child(args)
        return
    rows = []
    for classes in args.classes:
        for contender in ['replicated'] + [str(r) for r in args.rates]:
            need = layer_bytes(classes, args.dim, args.world, contender != 'replicated')
            if need * args.world > args.max_total_gb * 2**30:
                rows.append(dict(contender=contender, classes=classes, dim=args.dim,
                                 world=args.world, layer_mb=need / 2**20, per_step=None,
                                 extra_peak_mb=None, skipped=True))
                continue
            rows.append(launch(args, classes, contender))
    lines = ['| classes | contender | layer MB / rank | / replicated | s / step | '
             '/ replicated | extra peak RSS MB / rank |', '|---|---|---|---|---|---|---|']
    for row in rows:
        ref = next(r for r in rows if r['classes'] == row['classes']
                   and r['contender'] == 'replicated')
        name = 'replicated' if row['contender'] == 'replicated' \
            else f'partial FC, rate {row["contender"]}'
        mem_ratio = f'{row["layer_mb"] / ref["layer_mb"]:.2f}x'
        if row.get('skipped'):
            lines.append(f'| {row["classes"]:,} | {name} | {row["layer_mb"]:,.0f} | {mem_ratio} | '
                         f'not run: {row["layer_mb"] * row["world"] / 1024:.1f} GB over '
                         f'{row["world"]} ranks > --max-total-gb | | |')
            continue
        time_ratio = '' if ref.get('skipped') else f'{row["per_step"] / ref["per_step"]:.2f}x'
        lines.append(f'| {row["classes"]:,} | {name} | {row["layer_mb"]:,.0f} | {mem_ratio} | '
                     f'{row["per_step"]:.3f} | {time_ratio} | {row["extra_peak_mb"]:,.0f} |')
    load = os.getloadavg()[0] if hasattr(os, 'getloadavg') else None
    write_report('\n'.join(lines), rows, args.json, args.md, load_average=load,
                 machine=subprocess.getoutput('nproc') + ' cores')


if __name__ == '__main__':
    main()
