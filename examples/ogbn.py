r"""GATE on OGB node property prediction (ogbn-arxiv, ogbn-products): full
batch, or mini-batches of sampled neighbourhoods from PyG's NeighborLoader
(--loader neighbor, which needs pyg-lib or torch-sparse for the sampling).

The loss is taken on training nodes only; each epoch prints the accuracy of
OGB's :class:`Evaluator` on the three splits, the end the test accuracy at
the best validation accuracy. Mini-batch evaluation is layer-wise over full
neighbourhoods (:meth:`~torch_geometric.nn.models.BasicGNN.inference`),
exact. The dataset is downloaded on first use under :obj:`--root` (by
default the repository's :obj:`data/OGB`, or :obj:`$GATE_DATA_ROOT/OGB`)::

    python examples/ogbn.py --dataset ogbn-arxiv
    python examples/ogbn.py --dataset ogbn-products \
        --loader neighbor --num-neighbors 10 5 5
"""

import argparse
import math
import os
import os.path as osp
import shutil


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
        or osp.join(osp.dirname(osp.dirname(osp.realpath(__file__))), 'data'),
        'OGB',
    ),
    help="OGB's data folder, the dataset downloaded there if missing",
)
parser.add_argument('--loader', choices=('full', 'neighbor'), default='full')
parser.add_argument('--num-layers', type=number(int, 1), default=3)
parser.add_argument('--hidden-channels', type=number(int, 1), default=256)
parser.add_argument('--heads', type=number(int, 1), default=1)
parser.add_argument('--dropout', type=number(float, 0.0, 1.0), default=0.0)
parser.add_argument('--lr', type=number(float, 0.0, sides='()'), default=0.005)
parser.add_argument('--epochs', type=number(int, 1), default=100)
parser.add_argument('--batch-size', type=number(int, 1), default=1024)
parser.add_argument(
    '--num-neighbors',
    type=number(int, -1),
    nargs='+',
    default=[10],
    help='per layer (one value: every layer); -1: every neighbour',
)
parser.add_argument('--num-workers', type=number(int, 0), default=0)
parser.add_argument('--seed', type=number(int, 0, 2**64), default=0)
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
folder = osp.join(args.root, args.dataset.replace('-', '_'))
created = osp.abspath(folder)  # the outermost folder a download makes
while not osp.isdir(osp.dirname(created)):
    created = osp.dirname(created)
created = None if osp.exists(created) else created
had_raw = all(  # what OGB reads from raw/ (there, it downloads nothing)
    osp.isfile(osp.join(folder, 'raw', f))
    for f in ('edge.csv.gz', 'node-feat.csv.gz')
)
try:  # torch.load's weights_only default refuses the PyG classes it holds
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
        f"({type(e).__name__}: {e}); expected OGB's layout under --root "
        f"'{args.root}': '{folder}/raw/', '{folder}/split/' and "
        f"'{folder}/RELEASE_v1.txt'. Without network, copy them there, or "
        'point --root at a folder that holds them'
    )
split = dataset.get_idx_split()
data = dataset[0]
edge_index = to_undirected(data.edge_index, num_nodes=data.num_nodes)
data = Data(x=data.x, edge_index=edge_index, y=data.y.view(-1))
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
            # Trim each layer to the hops still needed (pyg-lib counts them):
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


best_val, test_acc = -1.0, float('nan')  # the first epoch sets both
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
