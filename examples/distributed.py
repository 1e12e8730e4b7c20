r"""Data-parallel training of a GATE network on several processes, started
by torchrun: DistributedDataParallel (DDP) with PyG's NeighborLoader, nccl
on GPUs (one per process), gloo on CPU. The sampling needs pyg-lib or
torch-sparse.

Every process generates and holds the same seeded graph (the package's
:class:`SelfSufficientER`), as in PyG's single-machine multi-GPU examples.
Each epoch cuts one permutation of the training nodes, the same on every
process (:class:`DistributedSampler` seeded with :obj:`--seed` and the
epoch), into global batches of :obj:`--batch-size` seed nodes, of which
each of the :math:`W` processes takes every :math:`W`-th. DDP averages the
gradients, so one step on :math:`W` processes is one step on the global
batch: with full neighbourhoods (:obj:`--num-neighbors -1`) the run matches
a single-process one (without :obj:`torchrun`) up to summation order.

::

    torchrun --standalone --nproc-per-node 2 examples/distributed.py
    torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d \
        --rdzv-endpoint host0:29500 examples/distributed.py --num-nodes 1000000
"""

import argparse
import gc
import math
import os
import tempfile


def number(kind, low, high=math.inf, sides='[)'):
    # An argparse type: an int or finite float from low to high, a side '['
    # or ']' including its bound; errors say as in 'an integer >= 0 and < 9',
    # 'a finite number > 0' (high None), for floats 'a number in [0.0, 1.0)'.
    top = math.inf if high is None else high
    finite = 'finite ' * math.isinf(top)
    left, right = sides[0], ')' if finite else sides[1]  # inf fails, as nan
    what = 'an integer' if kind is int else f'a {finite}number'
    if kind is float and high is not None:
        what += f' in {left}{low}, {high}{right}'
    else:
        what += f' >{"=" * (left == "[")} {low}'
        what += '' if finite else f' and <{"=" * (right == "]")} {high}'

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            value = math.nan
        if (low < value if left == '(' else low <= value) and (
            value < top if right == ')' else value <= top
        ):
            return value
        raise argparse.ArgumentTypeError(f'expected {what}, got {text!r}')

    return parse


parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
# From 4 nodes, a 2:1:1 split has a test node:
parser.add_argument('--num-nodes', type=number(int, 4), default=100_000)
parser.add_argument(
    '--avg-degree', type=number(float, 0.0, sides='()'), default=10.0
)
parser.add_argument('--num-classes', type=number(int, 2), default=8)
parser.add_argument('--num-layers', type=number(int, 1), default=2)
parser.add_argument('--hidden-channels', type=number(int, 1), default=64)
parser.add_argument('--lr', type=number(float, 0.0, sides='()'), default=0.005)
parser.add_argument(
    '--batch-size',
    type=number(int, 1),
    default=1024,
    help='global batch: seed nodes per step, all processes',
)
parser.add_argument(
    '--num-neighbors',
    type=number(int, -1),
    nargs='+',
    default=[10],
    help='per layer (one value: every layer); -1: all',
)
parser.add_argument('--epochs', type=number(int, 1), default=3)
parser.add_argument('--seed', type=number(int, 0, 2**64), default=0)
parser.add_argument(
    '--save',
    metavar='FILE',
    help="rank 0 saves the model's state_dict there, in an existing folder",
)


def parse_args(argv=None):
    args = parser.parse_args(argv)
    if len(args.num_neighbors) == 1:
        args.num_neighbors *= args.num_layers
    if len(args.num_neighbors) != args.num_layers:
        parser.error(
            f'argument --num-neighbors: expected one value or one per layer '
            f'({args.num_layers}), got {len(args.num_neighbors)}'
        )
    if args.num_classes > args.num_nodes:
        parser.error('argument --num-classes: expected at most --num-nodes')
    # Checked before the training, by the rank that saves (on its machine):
    if args.save == '':  # (`if args.save:` below would save nothing)
        parser.error("argument --save: expected a file's path, got ''")
    if args.save is not None and int(os.environ.get('RANK', 0)) == 0:
        folder = os.path.dirname(os.path.abspath(args.save))
        if os.path.isdir(args.save):
            parser.error(f'argument --save: {args.save!r} is a folder')
        if not os.path.isdir(folder):
            parser.error(f'argument --save: no folder {folder!r}')
        if not os.access(folder, os.W_OK):
            parser.error(f'argument --save: {folder!r} is not writable')
    return args


def main():
    args = parse_args()
    # The heavy imports after the arguments: --help is quick.
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data.distributed import DistributedSampler
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    from torch_geometric.typing import WITH_PYG_LIB, WITH_TORCH_SPARSE

    from torch_geometric_gate.datasets import SelfSufficientER
    from torch_geometric_gate.nn import GATE

    # Set by torchrun; without it, one process and no DDP:
    rank = int(os.environ.get('RANK', 0))
    world_size = int(os.environ.get('WORLD_SIZE', 1))
    local_rank = int(os.environ.get('LOCAL_RANK', 0))
    if args.batch_size % world_size != 0:
        parser.error(
            f'argument --batch-size: expected a multiple of the number of '
            f'processes ({world_size}), got {args.batch_size}'
        )

    with tempfile.TemporaryDirectory() as root:  # generated, the same graph
        data = SelfSufficientER(  # on every process; nothing is downloaded
            root,
            num_nodes=args.num_nodes,
            edge_prob=min(args.avg_degree / max(args.num_nodes - 1, 1), 1.0),
            num_classes=args.num_classes,
            seed=args.seed,
        )[0]
    train_idx = data.train_mask.nonzero().view(-1)
    test_idx = data.test_mask.nonzero().view(-1)
    # One permutation, each process every world_size-th seed of a batch:
    sampler = DistributedSampler(
        range(train_idx.numel()),
        world_size,
        rank,
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
    )
    if len(loader) == 0:
        parser.error(
            f'argument --batch-size: {args.batch_size} is more than the '
            f'{train_idx.numel()} training nodes of --num-nodes '
            f'{args.num_nodes}, no step in an epoch; lower --batch-size or '
            f'raise --num-nodes'
        )
    if not (WITH_PYG_LIB or WITH_TORCH_SPARSE):
        parser.error("NeighborLoader's sampling needs pyg-lib or torch-sparse")

    if torch.cuda.is_available():
        device, backend = torch.device('cuda', local_rank), 'nccl'
        torch.cuda.set_device(device)
    else:
        device, backend = torch.device('cpu'), 'gloo'
    if world_size > 1:
        dist.init_process_group(backend)

    torch.manual_seed(args.seed)  # the same initial parameters everywhere
    model = GATE(
        data.num_features,
        args.hidden_channels,
        args.num_layers,
        args.num_classes,
    ).to(device)
    ddp = model
    if world_size > 1:
        ddp = DistributedDataParallel(
            model, device_ids=[local_rank] if device.type == 'cuda' else None
        )
    optimizer = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    if rank == 0:
        print(
            f'{world_size} process(es) ({backend}); {data.num_nodes} nodes, '
            f'{data.num_edges} edges; {len(loader)} steps of '
            f'{args.batch_size} seeds per epoch',
            flush=True,
        )

    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        ddp.train()
        total_loss = torch.zeros((), device=device)
        for batch in loader:
            batch = batch.to(device)
            optimizer.zero_grad()
            out = ddp(batch.x, batch.edge_index)[: batch.batch_size]
            loss = F.cross_entropy(out, batch.y[: batch.batch_size])
            loss.backward()  # all-reduces (averages) the gradients
            optimizer.step()
            total_loss += loss.detach()
        if world_size > 1:  # the mean over the (equal) shards
            dist.all_reduce(total_loss)
            total_loss /= world_size
        if rank == 0:
            print(
                f'Epoch: {epoch:03d}, Loss: {total_loss / len(loader):.6f}',
                flush=True,
            )

    if rank == 0:  # layer-wise inference over full neighbourhoods
        model.eval()
        subgraph_loader = NeighborLoader(
            Data(x=data.x, edge_index=data.edge_index),
            num_neighbors=[-1],
            batch_size=4096,
        )
        pred = model.inference(subgraph_loader, device=device).argmax(-1)
        acc = float((pred[test_idx] == data.y[test_idx]).float().mean())
        print(f'Test accuracy: {acc:.4f}')
        if args.save:
            torch.save(model.state_dict(), args.save)

    if world_size > 1:
        # Tear down in order: wait for every rank, free DDP's reducer while the
        # process group is alive, then destroy the group (left to interpreter
        # shutdown, gloo's worker thread can deadlock with the main thread).
        dist.barrier()
        del ddp
        gc.collect()
        dist.destroy_process_group()


if __name__ == '__main__':
    main()
