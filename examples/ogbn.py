r"""GATE on OGB node property prediction (ogbn-arxiv, ogbn-products): full
batch, or mini-batches of sampled neighbourhoods from PyG's NeighborLoader
(--loader neighbor, which needs pyg-lib or torch-sparse for the sampling).

The model is :class:`torch_geometric_gate.nn.GATE` (a stack of
:class:`GATEConv` layers, the last one emitting the logits). The loss is
taken on training nodes only; each epoch prints the accuracy of OGB's
:class:`Evaluator` on the three splits, and the end the test accuracy at the
epoch of best validation accuracy. With :obj:`--loader neighbor`, evaluation
is layer-wise over full neighbourhoods
(:meth:`~torch_geometric.nn.models.BasicGNN.inference`), exact for every
node.

The dataset comes through OGB's :class:`PygNodePropPredDataset` under
:obj:`--root` (by default the repository's :obj:`data/OGB`, or
:obj:`$GATE_DATA_ROOT/OGB`), downloaded there on first use.

Then::

    python examples/ogbn.py --dataset ogbn-arxiv
    python examples/ogbn.py --dataset ogbn-products \
        --loader neighbor --num-neighbors 10 5 5
"""

import argparse
import math
import os
import os.path as osp
import shutil


def int_at_least(minimum, below=None):  # an argparse type with a range
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum or below and value >= below:
            raise argparse.ArgumentTypeError(
                f'expected an integer >= {minimum}'
                f'{f" and < {below}" if below else ""}, got {text!r}'
            )
        return value

    return parse


def float_in(low, high=math.inf, low_open=False, high_open=False):
    # An argparse type: a finite number in [low, high] (or open sides)
    unbounded = math.isinf(high)  # then "a finite number in (low, inf)"

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (low < value if low_open else low <= value) or not (
            (value < high if high_open else value <= high)
            and math.isfinite(value)
        ):
            raise argparse.ArgumentTypeError(
                f'expected a {"finite " * unbounded}number in '
                f'{"(" if low_open else "["}{low}, {high}'
                f'{")" if unbounded or high_open else "]"}, got {text!r}'
            )
        return value

    return parse


positive_float = float_in(0.0, low_open=True)


parser = argparse.ArgumentParser(
    description=__doc__.split('\n\n')[0],
    formatter_class=argparse.ArgumentDefaultsHelpFormatter,
)
parser.add_argument(
    '--dataset', choices=('ogbn-arxiv', 'ogbn-products'), default='ogbn-arxiv'
)
parser.add_argument(
    '--root',
    default=osp.join(
        os.environ.get('GATE_DATA_ROOT')
        or osp.normpath(
            osp.join(osp.dirname(osp.realpath(__file__)), '..', 'data')
        ),
        'OGB',
    ),
    help="OGB's data folder, the dataset downloaded there if missing",
)
parser.add_argument('--loader', choices=('full', 'neighbor'), default='full')
parser.add_argument('--num-layers', type=int_at_least(1), default=3)
parser.add_argument('--hidden-channels', type=int_at_least(1), default=256)
parser.add_argument('--heads', type=int_at_least(1), default=1)
parser.add_argument(
    '--dropout', type=float_in(0.0, 1.0, high_open=True), default=0.0
)
parser.add_argument('--lr', type=positive_float, default=0.005)
parser.add_argument('--epochs', type=int_at_least(1), default=100)
parser.add_argument('--batch-size', type=int_at_least(1), default=1024)
parser.add_argument(
    '--num-neighbors',
    type=int_at_least(-1),
    nargs='+',
    default=[10],
    help='per layer (one value: every layer); -1: every neighbour',
)
parser.add_argument('--num-workers', type=int_at_least(0), default=0)
parser.add_argument('--seed', type=int_at_least(0, 2**64), default=0)
args = parser.parse_args()
if args.hidden_channels % args.heads:  # concatenated heads split it
    parser.error(
        f'argument --hidden-channels: expected a multiple of --heads '
        f'({args.heads}), got {args.hidden_channels}'
    )
if len(args.num_neighbors) == 1:
    args.num_neighbors *= args.num_layers
if len(args.num_neighbors) != args.num_layers:
    parser.error(
        f'argument --num-neighbors: expected one value or one per layer '
        f'({args.num_layers}), got {len(args.num_neighbors)}'
    )

# The heavy imports after the arguments: --help and usage errors are quick.
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from ogb.nodeproppred import Evaluator, PygNodePropPredDataset  # noqa: E402
from torch_geometric.data import Data  # noqa: E402
from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr  # noqa
from torch_geometric.data.storage import GlobalStorage  # noqa: E402
from torch_geometric.loader import NeighborLoader  # noqa: E402
from torch_geometric.typing import WITH_PYG_LIB, WITH_TORCH_SPARSE  # noqa
from torch_geometric.utils import to_undirected  # noqa: E402

from torch_geometric_gate.nn import GATE  # noqa: E402

if args.loader == 'neighbor' and not (WITH_PYG_LIB or WITH_TORCH_SPARSE):
    parser.error(
        '--loader neighbor: the sampling needs pyg-lib or torch-sparse'
    )
device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
# ogb loads its processed file with `torch.load`, whose `weights_only=True`
# default (PyTorch >= 2.6) refuses PyG's classes: allow the ones it holds.
folder = osp.join(args.root, args.dataset.replace('-', '_'))
created = osp.abspath(folder)  # the outermost folder a download makes
while not osp.isdir(osp.dirname(created)):
    created = osp.dirname(created)
created = None if osp.exists(created) else created
# What OGB reads from raw/; with them there, it downloads nothing:
had_raw = all(
    osp.isfile(osp.join(folder, 'raw', f))
    for f in ('edge.csv.gz', 'node-feat.csv.gz')
)
try:
    with torch.serialization.safe_globals(
        [DataEdgeAttr, DataTensorAttr, GlobalStorage]
    ):
        dataset = PygNodePropPredDataset(args.dataset, root=args.root)
except EOFError:  # OGB's prompt, with no one to answer it
    parser.error(
        f"argument --root: '{folder}' holds no RELEASE_v1.txt, OGB's "
        f'marker of the current version of {args.dataset} (an older '
        'download, or a copy without it), and OGB asked whether to download '
        'it anew: answer on a terminal, or add the marker to a current copy'
    )
except OSError as e:  # no network: leave nothing half-written
    if had_raw:  # nothing was downloaded: processing it failed
        parser.error(
            f"argument --root: could not process '{folder}/raw/' "
            f'({type(e).__name__}: {e}); OGB writes the processed dataset '
            f"into '{folder}/processed/': point --root at a writable copy"
        )
    if created is not None:
        shutil.rmtree(created, ignore_errors=True)
    parser.error(
        f'argument --root: could not download {args.dataset} '
        f'({type(e).__name__}: '
        f"{e}); expected OGB's layout under --root '{args.root}': "
        f"'{folder}/raw/', '{folder}/split/' and '{folder}/RELEASE_v1.txt'. "
        'Without network, copy them there, or point --root at a folder '
        'that holds them'
    )
split = dataset.get_idx_split()
data = dataset[0]
data = Data(
    x=data.x,
    edge_index=to_undirected(data.edge_index, num_nodes=data.num_nodes),
    y=data.y.view(-1),
)
print(
    f'{args.dataset}: {data.num_nodes} nodes, {data.num_edges} edges '
    f'(undirected), train/valid/test {split["train"].numel()}/'
    f'{split["valid"].numel()}/{split["test"].numel()}; GATE '
    f'{args.num_layers} x {args.hidden_channels}, {args.loader} batches'
)

torch.manual_seed(args.seed)
model = GATE(
    dataset.num_features,
    args.hidden_channels,
    args.num_layers,
    dataset.num_classes,
    heads=args.heads,
    dropout=args.dropout,
).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
evaluator = Evaluator(args.dataset)

if args.loader == 'neighbor':
    train_loader = NeighborLoader(
        data,
        input_nodes=split['train'],
        num_neighbors=args.num_neighbors,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.num_workers,
    )
    subgraph_loader = NeighborLoader(
        Data(x=data.x, edge_index=data.edge_index),
        num_neighbors=[-1],
        batch_size=4 * args.batch_size,
        num_workers=args.num_workers,
    )
else:
    data = data.to(device)
    train_idx = split['train'].to(device)


def train():
    model.train()
    if args.loader == 'full':
        optimizer.zero_grad()
        out = model(data.x, data.edge_index)[train_idx]
        loss = F.cross_entropy(out, data.y[train_idx])
        loss.backward()
        optimizer.step()
        return float(loss.detach())
    total_loss = total = 0
    for batch in train_loader:
        batch = batch.to(device)
        optimizer.zero_grad()
        out = model(
            batch.x,
            batch.edge_index,
            # Each layer computes only the hops the next ones need:
            # (pyg-lib's sampler counts the hops, torch-sparse's does not):
            num_sampled_nodes_per_hop=batch.get('num_sampled_nodes'),
            num_sampled_edges_per_hop=batch.get('num_sampled_edges'),
        )[: batch.batch_size]  # the seed nodes come first
        loss = F.cross_entropy(out, batch.y[: batch.batch_size])
        loss.backward()
        optimizer.step()
        total_loss += float(loss.detach()) * batch.batch_size
        total += batch.batch_size
    return total_loss / total


@torch.no_grad()
def test():
    model.eval()
    if args.loader == 'full':
        out = model(data.x, data.edge_index)
    else:
        out = model.inference(subgraph_loader, device=device)
    pred = out.argmax(dim=-1, keepdim=True).cpu()
    y = data.y.view(-1, 1).cpu()
    return [
        evaluator.eval(dict(y_true=y[idx], y_pred=pred[idx]))['acc']
        for idx in (split['train'], split['valid'], split['test'])
    ]


best_val = test_acc = 0.0
for epoch in range(1, args.epochs + 1):
    loss = train()
    train_acc, val_acc, tmp_test_acc = test()
    if val_acc > best_val:
        best_val, test_acc = val_acc, tmp_test_acc
    print(
        f'Epoch: {epoch:03d}, Loss: {loss:.4f}, Train: {train_acc:.4f}, '
        f'Val: {val_acc:.4f}, Test: {tmp_test_acc:.4f}'
    )
print(f'Test accuracy at the best validation accuracy: {test_acc:.4f}')
