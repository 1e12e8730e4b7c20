r"""Data-parallel training of a GATE network on several processes and
machines: :class:`torch.nn.parallel.DistributedDataParallel` (DDP) with PyG's
:class:`~torch_geometric.loader.NeighborLoader`, one process per device,
:obj:`nccl` on GPUs and :obj:`gloo` on CPU, started by :obj:`torchrun`.

Every process holds the whole graph (as in PyG's single-machine multi-GPU
examples) and trains on its own disjoint shard of each global batch of
training nodes: each epoch, one permutation of the training nodes, the same
on every process (:class:`~torch.utils.data.distributed.DistributedSampler`
seeded with :obj:`--seed` and the epoch), is cut into global batches of
:obj:`--batch-size` seed nodes, and process :math:`r` of :math:`W` takes
every :math:`W`-th node of each global batch (a local batch of
:obj:`--batch-size` / :math:`W` seeds). DDP averages the gradients over the
processes (all-reduce), so with equal shards and a mean loss, one step on
:math:`W` processes is the step of one process on the whole global batch: the
parameters stay bit-identical across processes, and match a single-process
run with the same :obj:`--batch-size` up to floating-point summation order
(exactly so with full neighbourhoods, :obj:`--num-neighbors -1`; sampled
neighbourhoods differ between the two).

One machine, two processes (GPUs if there are, else CPU processes)::

    torchrun --standalone --nproc-per-node 2 examples/distributed.py \
        --num-nodes 100000 --epochs 5

Several machines (run on each; :obj:`--node-rank` 0 on the host named in
:obj:`--rdzv-endpoint`, or use :obj:`--rdzv-backend c10d` to let torchrun
assign the ranks)::

    torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d \
        --rdzv-id gate --rdzv-endpoint host0:29500 examples/distributed.py \
        --dataset ogbn-products --root data/OGB --epochs 20

Without :obj:`torchrun`, the script trains in one process without DDP (the
reference for the comparison above). Results go to :obj:`--out-dir`:
:obj:`rank{r}.pt` (final parameters of process :math:`r`),
:obj:`rank{r}.json` (its peak memory) and :obj:`result.json` (per-step
global loss, throughput in seed nodes per second, accuracy with
:obj:`--eval`). For graphs that do not fit into one machine's memory, PyG's
:mod:`torch_geometric.distributed` partitions the graph itself.
"""

import argparse
import gc
import json
import os
import os.path as osp
import resource
import sys
import time
from typing import Dict, List, Optional

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler
from torch_geometric.data import Data
from torch_geometric.utils import remove_self_loops, to_undirected

sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
from _experiment import int_at_least, positive_float, run_epochs  # noqa: E402
from ogbn import (  # noqa: E402
    DATASETS,
    build_model,
    load_ogb,
    train_step,
)


def synthetic_graph(
    num_nodes: int,
    avg_degree: float,
    num_features: int,
    num_classes: int,
    homophily: float = 0.8,
    seed: int = 0,
) -> Data:
    r"""A seeded random graph with class-dependent features and edges (a
    fraction :obj:`homophily` of the edges joins nodes of the same class),
    undirected, and a random 50/25/25 split (:obj:`train_mask`,
    :obj:`val_mask`, :obj:`test_mask`). The same arguments give the same
    graph on every process and machine.
    """
    if num_features < num_classes:
        raise ValueError(
            f"'num_features' ({num_features}) must be at least "
            f"'num_classes' ({num_classes})"
        )
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(num_classes, (num_nodes,), generator=gen)
    x = torch.randn(num_nodes, num_features, generator=gen)
    x[:, :num_classes] += torch.eye(num_classes)[y]
    num_edges = int(num_nodes * avg_degree / 2)
    src = torch.randint(num_nodes, (num_edges,), generator=gen)
    # With probability `homophily`, a random node of src's class:
    order = torch.argsort(y)
    count = torch.bincount(y, minlength=num_classes)
    start = torch.cumsum(count, 0) - count
    c = y[src]
    pick = (torch.rand(num_edges, generator=gen) * count[c]).long()
    same = order[start[c] + pick]
    other = torch.randint(num_nodes, (num_edges,), generator=gen)
    use_same = torch.rand(num_edges, generator=gen) < homophily
    dst = torch.where(use_same, same, other)
    edge_index = remove_self_loops(torch.stack([src, dst]))[0]
    edge_index = to_undirected(edge_index, num_nodes=num_nodes)
    perm = torch.randperm(num_nodes, generator=gen)
    masks = []
    for lo, hi in ((0, 2), (2, 3), (3, 4)):
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[perm[lo * num_nodes // 4 : hi * num_nodes // 4]] = True
        masks.append(mask)
    return Data(
        x=x,
        edge_index=edge_index,
        y=y,
        train_mask=masks[0],
        val_mask=masks[1],
        test_mask=masks[2],
    )


def load_data(args):
    if args.dataset == 'synthetic':
        data = synthetic_graph(
            args.num_nodes,
            args.avg_degree,
            args.num_features,
            args.num_classes,
            seed=args.graph_seed,
        )
        split = {
            key: mask.nonzero().view(-1)
            for key, mask in (
                ('train', data.train_mask),
                ('valid', data.val_mask),
                ('test', data.test_mask),
            )
        }
        data = Data(x=data.x, edge_index=data.edge_index, y=data.y)
        return data, split, args.num_classes
    data, split, num_classes = load_ogb(args.dataset, args.root)
    data.y = data.y.view(-1)
    return data, split, num_classes


def reset_peak_memory(device: torch.device):
    r"""Starts the peak-memory count of the training: on CUDA the peak
    allocated memory, on Linux CPUs the peak resident size (:obj:`VmHWM`,
    so that building the graph does not hide the training's peak)."""
    if device.type == 'cuda':
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
    except OSError:  # pragma: no cover  (not Linux)
        pass


def peak_memory_bytes(device: torch.device) -> int:
    if device.type == 'cuda':
        return torch.cuda.max_memory_allocated(device)
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover  (not Linux)
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        '--dataset', choices=('synthetic',) + DATASETS, default='synthetic'
    )
    parser.add_argument('--root', default='data/OGB')
    parser.add_argument('--num-nodes', type=int_at_least(1), default=10000)
    parser.add_argument('--avg-degree', type=positive_float, default=10.0)
    parser.add_argument('--num-features', type=int_at_least(1), default=32)
    parser.add_argument('--num-classes', type=int_at_least(2), default=4)
    parser.add_argument('--graph-seed', type=int, default=0)
    parser.add_argument('--model', choices=('GATE', 'GATv2'), default='GATE')
    parser.add_argument('--num-layers', type=int_at_least(1), default=2)
    parser.add_argument('--hidden-channels', type=int_at_least(1), default=64)
    parser.add_argument('--heads', type=int_at_least(1), default=1)
    parser.add_argument('--lr', type=positive_float, default=0.005)
    parser.add_argument(
        '--batch-size',
        type=int_at_least(1),
        default=1024,
        help='global batch: seed nodes per step over all processes',
    )
    parser.add_argument(
        '--num-neighbors',
        type=int,
        nargs='+',
        default=[10],
        help='per layer (one value: every layer); -1: all neighbours',
    )
    parser.add_argument('--epochs', type=int_at_least(1), default=3)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--num-workers', type=int_at_least(0), default=0)
    parser.add_argument(
        '--eval',
        action='store_true',
        help='rank 0 computes validation and test accuracy at the end '
        '(layer-wise full-neighbourhood inference)',
    )
    parser.add_argument('--out-dir', default=None)
    args = parser.parse_args(argv)
    if len(args.num_neighbors) == 1:
        args.num_neighbors = args.num_neighbors * args.num_layers
    if len(args.num_neighbors) != args.num_layers:
        parser.error(
            f'--num-neighbors takes one value or one per layer '
            f'({args.num_layers}), got {len(args.num_neighbors)}'
        )
    return args


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    from torch_geometric.loader import NeighborLoader

    distributed = 'RANK' in os.environ and 'WORLD_SIZE' in os.environ
    if distributed:
        rank = int(os.environ['RANK'])
        world_size = int(os.environ['WORLD_SIZE'])
        local_rank = int(os.environ.get('LOCAL_RANK', 0))
    else:
        rank, world_size, local_rank = 0, 1, 0
    if torch.cuda.is_available():
        device = torch.device('cuda', local_rank)
        torch.cuda.set_device(device)
        backend = 'nccl'
    else:
        device = torch.device('cpu')
        backend = 'gloo'
    if distributed:
        dist.init_process_group(backend)
    if args.batch_size % world_size != 0:
        raise ValueError(
            f'--batch-size ({args.batch_size}) must be divisible by the '
            f'number of processes ({world_size})'
        )
    log = print if rank == 0 else (lambda *a, **k: None)

    data, split, num_classes = load_data(args)
    train_idx = split['train']
    # The same permutation of the training nodes on every process; process
    # `rank` takes every `world_size`-th node, so that step s of the union
    # of processes is the s-th global batch of that permutation.
    sampler = DistributedSampler(
        range(train_idx.numel()),
        num_replicas=world_size,
        rank=rank,
        shuffle=True,
        seed=args.seed,
        drop_last=True,
    )
    loader = NeighborLoader(
        data,
        input_nodes=train_idx,
        num_neighbors=args.num_neighbors,
        batch_size=args.batch_size // world_size,
        sampler=sampler,
        drop_last=True,
        num_workers=args.num_workers,
    )

    torch.manual_seed(args.seed)
    model = build_model(
        args.model,
        data.num_features,
        args.hidden_channels,
        args.num_layers,
        num_classes,
        heads=args.heads,
    ).to(device)
    module = model
    if distributed:
        model = DistributedDataParallel(
            model, device_ids=[local_rank] if device.type == 'cuda' else None
        )
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    log(
        f'{args.model} {args.num_layers} x {args.hidden_channels} on '
        f'{world_size} process(es) ({backend}, {device.type}); '
        f'{data.num_nodes} nodes, {data.num_edges} edges, '
        f'{train_idx.numel()} training nodes, global batch '
        f'{args.batch_size}, {len(loader)} steps per epoch',
        flush=True,
    )

    reset_peak_memory(device)
    losses: List[float] = []
    first_seeds: List[int] = []
    epoch_seconds: List[float] = []

    def step(epoch, observe):  # no selection: every epoch runs
        sampler.set_epoch(epoch)
        model.train()
        if device.type == 'cuda':
            torch.cuda.synchronize()
        start = time.perf_counter()
        for batch in loader:
            losses.append(train_step(model, optimizer, batch.to(device)))
            if not first_seeds:
                first_seeds.extend(batch.n_id[: batch.batch_size].tolist())
        if device.type == 'cuda':
            torch.cuda.synchronize()
        epoch_seconds.append(time.perf_counter() - start)
        steps = len(loader)
        log(
            f'Epoch {epoch:03d}: rank-0 loss '
            f'{sum(losses[-steps:]) / steps:.4f}, '
            f'{steps * args.batch_size / epoch_seconds[-1]:.0f} nodes/s',
            flush=True,
        )

    run_epochs(step, [], args.epochs, device)

    # Per-step global loss: the mean over the (equal) shards.
    if distributed:
        gathered: List[Optional[List[float]]] = [None] * world_size
        dist.all_gather_object(gathered, losses)
        global_losses = [sum(v) / world_size for v in zip(*gathered)]
    else:
        global_losses = losses
    # Throughput after the first epoch (warm-up) when there are several.
    timed = epoch_seconds[1:] or epoch_seconds
    nodes_per_s = len(loader) * args.batch_size * len(timed) / sum(timed)
    mine = dict(
        rank=rank,
        peak_memory_bytes=peak_memory_bytes(device),
        first_batch_seeds=first_seeds,
    )
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        torch.save(
            module.state_dict(), osp.join(args.out_dir, f'rank{rank}.pt')
        )
        with open(osp.join(args.out_dir, f'rank{rank}.json'), 'w') as f:
            json.dump(mine, f)

    result = dict(
        args=vars(args),
        world_size=world_size,
        backend=backend,
        device=str(device),
        steps_per_epoch=len(loader),
        losses=global_losses,
        epoch_seconds=epoch_seconds,
        nodes_per_s=nodes_per_s,
        torch_threads=torch.get_num_threads(),
    )
    if rank == 0 and args.eval:
        subgraph_loader = NeighborLoader(
            Data(x=data.x, edge_index=data.edge_index),
            num_neighbors=[-1],
            batch_size=4096,
            shuffle=False,
        )
        module.eval()
        pred = module.inference(subgraph_loader, device=device).argmax(-1)
        for key in ('valid', 'test'):
            idx = split[key]
            result[f'{key}_acc'] = float(
                (pred[idx] == data.y[idx]).float().mean()
            )
        log(f'valid {result["valid_acc"]:.4f} test {result["test_acc"]:.4f}')
    if rank == 0 and args.out_dir:
        with open(osp.join(args.out_dir, 'result.json'), 'w') as f:
            json.dump(result, f, indent=1)
    log(f'{nodes_per_s:.0f} training nodes/s on {world_size} process(es)')
    if distributed:
        # Tear down in order: wait for every rank, free DDP's reducer while
        # the process group is alive, then destroy the group. Leaving it to
        # interpreter shutdown can deadlock: the main thread joins gloo's
        # worker thread while holding the GIL that the worker waits for.
        dist.barrier()
        del model
        gc.collect()
        dist.destroy_process_group()
    return result


if __name__ == '__main__':
    main()
