r"""GATE on the OGB node property prediction datasets ogbn-arxiv,
ogbn-products and ogbn-mag (the paper's Table 4, settings of Table 5).

The paper's settings (Appendix C) are the defaults: one head, no dropout, no
weight decay, Adam, at most 2000 epochs, and

============== ====== ===== ====== =============================
dataset        layers width lr     paper GATE test acc (layers)
============== ====== ===== ====== =============================
ogbn-arxiv     12     256   0.001  79.57 +- 0.84 (12)
ogbn-products  8      128   0.001  86.24 +- 1.01 (8)
ogbn-mag       5      128   0.005  35.29 +- 0.36 (5)
============== ====== ===== ====== =============================

The paper's arxiv and products numbers are not comparable with the OGB
leaderboard: the authors' GraphSAINT script took the training loss on the
first 20000 nodes of every sampled subgraph, whatever their split, so
validation and test labels entered training (see the docs page "Paper vs
code"). Here the loss is taken on training nodes only, in both modes.

ogbn-mag is used through its homogeneous paper-citation view, as PyG's and
OGB's own homogeneous ogbn-mag examples do: the ``paper`` nodes with their
128 features, the ``(paper, cites, paper)`` edges (made undirected) and the
``paper`` split; authors, institutions and fields of study are dropped.
ogbn-arxiv's directed citation edges are made undirected too; ogbn-products
is undirected already.

**Full batch or mini-batch.** With ``--mode auto`` (the default) the script
estimates the memory of one full-batch training step (see
:func:`estimate_full_batch_bytes` and the constants in
:data:`MEMORY_BYTES`) and trains full-batch if it fits into
``--memory-budget`` (default: 90% of the GPU's memory, or half the
available RAM on CPU), else on mini-batches from PyG's
:class:`~torch_geometric.loader.NeighborLoader` seeded at the training nodes
(``--num-neighbors`` per layer, ``--batch-size`` seed nodes), trimming
each layer to the hops it still needs. It prints the estimate and the
decision. Mini-batch evaluation is PyG's layer-wise full-neighbourhood
inference (:meth:`~torch_geometric.nn.models.BasicGNN.inference`), which
computes every node's output exactly, one layer at a time.

Each run reports the test accuracy at the epoch of best validation
accuracy (the OGB leaderboard's protocol; accuracy as OGB's
:class:`~ogb.nodeproppred.Evaluator` defines it, computed on the device),
selected in the epoch loop every example shares
(``examples/_experiment.py``).

Run from the repository root (the data is downloaded to ``--root`` on first
use: about 0.1 GB for arxiv, 1.4 GB for products, 0.4 GB for mag)::

    python examples/ogbn.py --dataset ogbn-arxiv --runs 5
    python examples/ogbn.py --dataset ogbn-products --runs 5
    python examples/ogbn.py --dataset ogbn-mag --runs 5

    # OGB's own GATv2 baseline setting for comparison (3 layers):
    python examples/ogbn.py --dataset ogbn-arxiv --model GATv2 \
        --num-layers 3 --lr 0.005
"""

import argparse
import json
import os
import os.path as osp
import sys
import time
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.nn.conv import GATv2Conv
from torch_geometric.nn.models import GAT
from torch_geometric.utils import coalesce, remove_self_loops, to_undirected

try:
    from torch_geometric_gate.nn import GATE, GATEConv
except ImportError:  # Run as a script without the package installed.
    sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))
    from torch_geometric_gate.nn import GATE, GATEConv
sys.path.insert(0, osp.dirname(osp.abspath(__file__)))  # for _experiment

DATASETS = ('ogbn-arxiv', 'ogbn-products', 'ogbn-mag')

# The paper's Table 5 (layers, width, learning rate) and Table 4 (GATE's and
# GAT's test accuracy; GAT reproduces Velickovic et al. with 2-3 layers).
PAPER = {
    'ogbn-arxiv': dict(
        num_layers=12,
        hidden=256,
        lr=0.001,
        gate='79.57 +- 0.84',
        gat='71.87 +- 0.16 (3)',
    ),
    'ogbn-products': dict(
        num_layers=8,
        hidden=128,
        lr=0.001,
        gate='86.24 +- 1.01',
        gat='80.63 +- 0.46 (3)',
    ),
    'ogbn-mag': dict(
        num_layers=5,
        hidden=128,
        lr=0.005,
        gate='35.29 +- 0.36',
        gat='32.61 +- 0.29 (2)',
    ),
}

# Sizes for --estimate-only: nodes, undirected edges (the paper's Table 5;
# ogbn-mag: papers and their citations), features, classes.
OGB_SIZES = {
    'ogbn-arxiv': (169343, 2315598, 128, 40),
    'ogbn-products': (2449029, 123718152, 100, 47),
    'ogbn-mag': (736389, 10792672, 128, 349),
}

# Memory of one full-batch training step, per layer, in bytes per
# (edge x output channel) and per (node x output channel), edges counted
# with the self-loops the layer adds. These are the tensors a layer saves for
# the backward pass, measured on CPU (float32, one head, width 256) with
#
#     python examples/ogbn.py --calibrate-memory
#
# which prints these numbers for the GATEConv and GATv2Conv installed. THIS
# IS THE ONE PLACE TO UPDATE when the layers' memory changes. The peak of a
# training step is above what is saved (transient buffers, gradients):
# PEAK_FACTOR is the peak RSS growth of a training step over the saved
# bytes, 2.2-2.5 for GATEConv on graphs of 10^5-10^6 edges in
# benchmark/results/cpu-memory.md.
MEMORY_BYTES = {
    'GATE': dict(edge=0.0, edge_fixed=30.0, node=16.0),
    'GATv2': dict(edge=12.0, edge_fixed=28.0, node=4.0),
}
PEAK_FACTOR = 2.5


def load_ogb(name: str, root: str) -> Tuple[Data, Dict[str, Tensor], int]:
    r"""Loads an OGB node property prediction dataset as one undirected
    homogeneous graph (ogbn-mag: its paper-citation view), its split and its
    number of classes. :obj:`data.y` keeps OGB's shape :obj:`[N, 1]`.
    """
    from ogb.nodeproppred import PygNodePropPredDataset

    # OGB 1.3.6 loads its processed file with `torch.load`, whose
    # `weights_only=True` default (PyTorch >= 2.6) refuses PyG's classes:
    # allow the ones a processed OGB graph holds.
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    safe = [DataEdgeAttr, DataTensorAttr, GlobalStorage]
    with torch.serialization.safe_globals(safe):
        dataset = PygNodePropPredDataset(name, root=root)
    split = dataset.get_idx_split()
    data = dataset[0]
    if name == 'ogbn-mag':
        data = Data(
            x=data.x_dict['paper'],
            edge_index=data.edge_index_dict[('paper', 'cites', 'paper')],
            y=data.y_dict['paper'],
        )
        split = {key: idx['paper'] for key, idx in split.items()}
    data = Data(x=data.x, edge_index=data.edge_index, y=data.y)
    data.edge_index = to_undirected(data.edge_index, num_nodes=data.num_nodes)
    return data, split, dataset.num_classes


def build_model(
    name: str,
    in_channels: int,
    hidden_channels: int,
    num_layers: int,
    out_channels: int,
    heads: int = 1,
) -> torch.nn.Module:
    r"""GATE (paper's init, no bias, no dropout) or PyG's GATv2 network."""
    if name == 'GATE':
        return GATE(
            in_channels, hidden_channels, num_layers, out_channels, heads=heads
        )
    if name == 'GATv2':
        return GAT(
            in_channels,
            hidden_channels,
            num_layers,
            out_channels,
            heads=heads,
            v2=True,
        )
    raise ValueError(f"'model' must be 'GATE' or 'GATv2' (got {name!r})")


def estimate_full_batch_bytes(
    model: str,
    num_nodes: int,
    num_edges: int,
    num_features: int,
    hidden_channels: int,
    num_layers: int,
    num_classes: int,
    num_params: int,
) -> int:
    r"""Estimated peak memory of one full-batch training step in bytes.

    .. math::
        \mathrm{PEAK\_FACTOR} \cdot \sum_{l=1}^{L} \big( C_l \,
        \big(b_E \, (|E| + |V|) + b_V \, |V|\big) + f_E \, (|E| + |V|)
        \big)
        + 4 \, |V| \, F + 16 \, |\theta|

    with :math:`C_l` the output width of layer :math:`l`, :math:`b_E`,
    :math:`f_E` (bytes per edge whatever the width) and :math:`b_V` from
    :data:`MEMORY_BYTES` (self-loops counted as edges), the
    input features and 16 bytes per parameter (weights, gradients and Adam's
    two moments).
    """
    per = MEMORY_BYTES[model]
    widths = [hidden_channels] * (num_layers - 1) + [num_classes]
    layers = sum(
        c * (per['edge'] * (num_edges + num_nodes) + per['node'] * num_nodes)
        + per['edge_fixed'] * (num_edges + num_nodes)
        for c in widths
    )
    return int(
        PEAK_FACTOR * layers + 4 * num_nodes * num_features + 16 * num_params
    )


def default_memory_budget(device: torch.device) -> int:
    if device.type == 'cuda':
        return int(0.9 * torch.cuda.get_device_properties(device).total_memory)
    try:
        pages = os.sysconf('SC_AVPHYS_PAGES')
        return int(0.5 * pages * os.sysconf('SC_PAGE_SIZE'))
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return 4 * 2**30


def _saved_bytes(module: torch.nn.Module, x: Tensor, edge_index: Tensor):
    storages = {}

    def pack(t: Tensor):
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = module(x, edge_index)
    out.sum().backward()
    return sum(storages.values())


def calibrate_memory(
    widths: Tuple[int, int] = (64, 256), heads: int = 1, num_nodes: int = 2000
) -> Dict[str, Dict[str, float]]:
    r"""Measures :data:`MEMORY_BYTES` for the installed layers from the bytes
    saved for backward by one layer (in and out channels equal to each of
    :obj:`widths`) on two random graphs with :obj:`num_nodes` nodes and 2 or
    8 edges per node, self-loops counted as edges: per (edge x channel),
    per edge whatever the width (GATE's eager path saves only
    :obj:`[E, H]` edge tensors and the edge index), and per (node x channel)
    at the larger width.
    """
    gen = torch.Generator().manual_seed(0)
    per_edge: Dict[str, List[float]] = {'GATE': [], 'GATv2': []}
    node: Dict[str, float] = {}
    for width in widths:
        layers = {
            'GATE': GATEConv(width, width // heads, heads=heads),
            'GATv2': GATv2Conv(width, width // heads, heads=heads),
        }
        x = torch.randn(num_nodes, width, generator=gen)
        rows = []
        for degree in (2, 8):
            ei = torch.randint(
                num_nodes, (2, degree * num_nodes), generator=gen
            )
            ei = coalesce(remove_self_loops(ei)[0], num_nodes=num_nodes)
            rows.append((ei.size(1) + num_nodes, ei))
        (e1, ei1), (e2, ei2) = rows
        for name, layer in layers.items():
            s1 = _saved_bytes(layer, x, ei1)
            s2 = _saved_bytes(layer, x, ei2)
            edge = (s2 - s1) / (e2 - e1)  # bytes per edge at this width
            per_edge[name].append(edge)
            node[name] = (s1 - edge * e1) / num_nodes / width
    w1, w2 = widths
    result = {}
    for name, (t1, t2) in per_edge.items():
        channel = (t2 - t1) / (w2 - w1)
        result[name] = dict(
            edge=round(channel, 2),
            edge_fixed=round(max(t1 - channel * w1, 0.0), 1),
            node=round(node[name], 2),
        )
    return result


def accuracy(y: Tensor, pred: Tensor, idx: Tensor) -> Tensor:
    r"""The fraction of the nodes :obj:`idx` whose predicted label is right,
    as a device scalar."""
    return (pred[idx] == y[idx]).double().mean()


def make_loaders(data: Data, train_idx: Tensor, args):
    from torch_geometric.loader import NeighborLoader

    train_loader = NeighborLoader(
        data,
        input_nodes=train_idx,
        num_neighbors=args.num_neighbors,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.num_workers,
    )
    subgraph_loader = NeighborLoader(
        Data(x=data.x, edge_index=data.edge_index),
        input_nodes=None,
        num_neighbors=[-1],
        batch_size=args.inference_batch_size,
        shuffle=False,
        num_workers=args.num_workers,
    )
    return train_loader, subgraph_loader


def train_full(model, optimizer, data: Data, train_idx: Tensor) -> float:
    model.train()
    optimizer.zero_grad()
    out = model(data.x, data.edge_index)[train_idx]
    loss = F.cross_entropy(out, data.y[train_idx].view(-1))
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def train_step(model, optimizer, batch) -> float:
    r"""One optimizer step on a :class:`~torch_geometric.loader.NeighborLoader`
    mini-batch (already on the model's device): the loss is taken on the
    seed nodes only, the first :obj:`batch.batch_size` nodes, which are
    training nodes. Returns the loss."""
    optimizer.zero_grad()
    out = model(
        batch.x,
        batch.edge_index,
        # Trim each layer to the hops it still needs (with pyg-lib;
        # torch-sparse's sampler does not count the hops):
        num_sampled_nodes_per_hop=batch.get('num_sampled_nodes'),
        num_sampled_edges_per_hop=batch.get('num_sampled_edges'),
    )[: batch.batch_size]
    loss = F.cross_entropy(out, batch.y[: batch.batch_size].view(-1))
    loss.backward()  # under DDP: all-reduces (averages) the gradients
    optimizer.step()
    return float(loss.detach())


def train_mini(model, optimizer, loader, device) -> float:
    model.train()
    total_loss = total = 0
    for batch in loader:
        loss = train_step(model, optimizer, batch.to(device))
        total_loss += loss * batch.batch_size
        total += batch.batch_size
    return total_loss / total


@torch.no_grad()
def predict(model, data: Data, subgraph_loader, device) -> Tensor:
    model.eval()
    if subgraph_loader is None:
        out = model(data.x, data.edge_index)
    else:
        out = model.inference(subgraph_loader, device=device)
    return out.argmax(dim=-1, keepdim=True).cpu()


def run(args, data, split, num_classes, device, mode, seed) -> Dict:
    from _experiment import Selector, as_python, run_epochs

    torch.manual_seed(seed)
    model = build_model(
        args.model,
        data.num_features,
        args.hidden_channels,
        args.num_layers,
        num_classes,
        heads=args.heads,
    ).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    train_idx = split['train']
    y = data.y.cpu()

    if mode == 'full':
        full = data.to(device)
        train_dev = train_idx.to(device)
        loaders = None
    else:
        full = data
        loaders = make_loaders(data, train_idx, args)

    selector = Selector('valid', 'max')  # the first best epoch
    history = []

    def step(epoch, observe):
        if mode == 'full':
            loss = train_full(model, optimizer, full, train_dev)
        else:
            loss = train_mini(model, optimizer, loaders[0], device)
        row = dict(epoch=epoch, loss=loss)
        if epoch % args.eval_every == 0 or epoch == args.epochs:
            pred = predict(
                model, full, None if loaders is None else loaders[1], device
            )
            values = {
                key: accuracy(y, pred, split[key])
                for key in ('train', 'valid', 'test')
            }
            observe(values)
            row.update(as_python(values))
            print(
                f'Epoch {epoch:04d} loss {loss:.4f} train {row["train"]:.4f} '
                f'valid {row["valid"]:.4f} test {row["test"]:.4f}',
                flush=True,
            )
        history.append(row)

    start = time.perf_counter()
    run_epochs(step, [selector], args.epochs, device)
    chosen = selector.result()
    return dict(
        valid=chosen['at']['valid'],
        test=chosen['at']['test'],
        epoch=chosen['epoch'],
        seconds=time.perf_counter() - start,
        history=history,
    )


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument('--dataset', choices=DATASETS, default='ogbn-arxiv')
    parser.add_argument('--root', default='data/OGB')
    parser.add_argument('--model', choices=('GATE', 'GATv2'), default='GATE')
    parser.add_argument('--num-layers', type=int, help='paper: Table 5')
    parser.add_argument('--hidden-channels', type=int, help='paper: Table 5')
    parser.add_argument('--lr', type=float, help='paper: Table 5')
    parser.add_argument('--heads', type=int, default=1)
    parser.add_argument('--epochs', type=int, default=2000)
    parser.add_argument('--eval-every', type=int, default=1)
    parser.add_argument('--runs', type=int, default=1)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument(
        '--mode', choices=('auto', 'full', 'mini'), default='auto'
    )
    parser.add_argument(
        '--memory-budget',
        type=float,
        help='GB for --mode auto (default: 90%% of the GPU, '
        'half the available RAM on CPU)',
    )
    parser.add_argument('--batch-size', type=int, default=1024)
    parser.add_argument(
        '--num-neighbors',
        type=int,
        nargs='+',
        default=[5],
        help='per layer; one value is used for every layer',
    )
    parser.add_argument('--inference-batch-size', type=int, default=4096)
    parser.add_argument('--num-workers', type=int, default=0)
    parser.add_argument('--device', default=None)
    parser.add_argument('--out', help='write the results as JSON here')
    parser.add_argument(
        '--estimate-only',
        action='store_true',
        help='print the full-batch memory estimate for the dataset (sizes '
        'from the paper, no download) and exit',
    )
    parser.add_argument(
        '--calibrate-memory',
        action='store_true',
        help='measure MEMORY_BYTES for the installed layers and exit',
    )
    args = parser.parse_args(argv)
    paper = PAPER[args.dataset]
    if args.num_layers is None:
        args.num_layers = paper['num_layers']
    if args.hidden_channels is None:
        args.hidden_channels = paper['hidden']
    if args.lr is None:
        args.lr = paper['lr']
    if len(args.num_neighbors) == 1:
        args.num_neighbors = args.num_neighbors * args.num_layers
    if len(args.num_neighbors) != args.num_layers:
        parser.error(
            f'--num-neighbors takes one value or one per layer '
            f'({args.num_layers}), got {len(args.num_neighbors)}'
        )
    if args.out and not (args.calibrate_memory or args.estimate_only):
        from _experiment import check_writable

        check_writable(parser, '--out', args.out)
    for name in (
        'num_layers',
        'hidden_channels',
        'epochs',
        'eval_every',
        'runs',
        'batch_size',
        'inference_batch_size',
        'heads',
    ):
        if getattr(args, name) < 1:
            parser.error(f'--{name.replace("_", "-")} must be at least 1')
    return args


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    if args.calibrate_memory:
        measured = calibrate_memory()
        print('MEMORY_BYTES = ' + json.dumps(measured))
        return measured

    if args.estimate_only:
        num_nodes, num_edges, num_features, num_classes = OGB_SIZES[
            args.dataset
        ]
        model = build_model(
            args.model,
            num_features,
            args.hidden_channels,
            args.num_layers,
            num_classes,
            heads=args.heads,
        )
        estimate = estimate_full_batch_bytes(
            args.model,
            num_nodes,
            num_edges,
            num_features,
            args.hidden_channels,
            args.num_layers,
            num_classes,
            sum(p.numel() for p in model.parameters()),
        )
        print(
            f'{args.dataset} {args.model} {args.num_layers} x '
            f'{args.hidden_channels}: full-batch training step needs about '
            f'{estimate / 2**30:.1f} GB'
        )
        return dict(estimate_bytes=estimate)

    device = torch.device(
        args.device or ('cuda' if torch.cuda.is_available() else 'cpu')
    )
    data, split, num_classes = load_ogb(args.dataset, args.root)
    print(
        f'{args.dataset}: {data.num_nodes} nodes, {data.num_edges} edges '
        f'(undirected), {data.num_features} features, {num_classes} classes; '
        f'train/valid/test {len(split["train"])}/{len(split["valid"])}/'
        f'{len(split["test"])}'
    )
    num_params = sum(
        p.numel()
        for p in build_model(
            args.model,
            data.num_features,
            args.hidden_channels,
            args.num_layers,
            num_classes,
            heads=args.heads,
        ).parameters()
    )
    estimate = estimate_full_batch_bytes(
        args.model,
        data.num_nodes,
        data.num_edges,
        data.num_features,
        args.hidden_channels,
        args.num_layers,
        num_classes,
        num_params,
    )
    budget = (
        int(args.memory_budget * 2**30)
        if args.memory_budget is not None
        else default_memory_budget(device)
    )
    if args.mode == 'auto':
        mode = 'full' if estimate <= budget else 'mini'
        why = 'fits' if mode == 'full' else 'does not fit'
    else:
        mode, why = args.mode, 'forced by --mode'
    print(
        f'{args.model} {args.num_layers} x {args.hidden_channels}: '
        f'full-batch training step needs about {estimate / 2**30:.2f} GB, '
        f'budget {budget / 2**30:.2f} GB on {device} ({why}): '
        + (
            'full-batch training'
            if mode == 'full'
            else f'mini-batch training (NeighborLoader, '
            f'{args.num_neighbors} neighbours, batch {args.batch_size}) '
            f'with layer-wise inference'
        ),
        flush=True,
    )

    runs = []
    for r in range(args.runs):
        result = run(
            args, data, split, num_classes, device, mode, args.seed + r
        )
        print(
            f'Run {r}: test {result["test"]:.4f} at best valid '
            f'{result["valid"]:.4f} (epoch {result["epoch"]}, '
            f'{result["seconds"]:.0f} s)',
            flush=True,
        )
        runs.append(result)
    tests = torch.tensor([r['test'] for r in runs]) * 100
    std = float(tests.std()) if len(runs) > 1 else 0.0
    paper = PAPER[args.dataset]
    print(
        f'{args.dataset} {args.model}: test {float(tests.mean()):.2f} +- '
        f'{std:.2f} over {len(runs)} run(s) (paper: GATE '
        f'{paper["gate"]}, GAT {paper["gat"]})'
    )
    summary = dict(
        args=vars(args),
        mode=mode,
        estimate_bytes=estimate,
        budget_bytes=budget,
        num_nodes=data.num_nodes,
        num_edges=data.num_edges,
        runs=runs,
        test_mean=float(tests.mean()),
        test_std=std,
    )
    if args.out:
        os.makedirs(osp.dirname(osp.abspath(args.out)), exist_ok=True)
        with open(args.out, 'w') as f:
            json.dump(summary, f, indent=1)
    return summary


if __name__ == '__main__':
    main()
