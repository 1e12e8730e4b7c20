r"""GATE against GATv2 on a heterophilous graph: Minesweeper (or Tolokers)
of Platonov et al. (ICLR 2023), one split, test ROC AUC and the attention
each layer learned.

Both networks are the same stack of attention layers (ReLU in between, the
last layer outputs the two class logits), with :class:`GATEConv` or PyG's
:class:`GATv2Conv`. Each trains with Adam, full batch, on the split's
training nodes; the reported test ROC AUC is the one at the epoch of best
validation ROC AUC. Then it prints the mean self-attention
:math:`\alpha_{v,v}` of every layer (:math:`1`: the nodes ignore their
neighbours, :math:`0`: they ignore themselves); :obj:`--plot` also saves
its histogram per layer.

The data is read from an offline copy: :obj:`--data-root` holds
:obj:`minesweeper/raw/minesweeper.npz` (the layout of PyG's
:class:`HeterophilousGraphDataset`; in this repository
:obj:`../shared/data/heterophilous`). It is copied to a temporary folder
first, so that the data root is never written to, and nothing is
downloaded::

    python examples/heterophilous.py --data-root ../shared/data/heterophilous
    python examples/heterophilous.py --data-root ../shared/data/heterophilous \
        --dataset Tolokers --num-layers 2 --plot alpha_vv.png
"""

import argparse
import os.path as osp
import shutil
import tempfile

import torch
import torch.nn.functional as F
from sklearn.metrics import roc_auc_score
from torch_geometric.datasets import HeterophilousGraphDataset
from torch_geometric.nn import GATv2Conv

from torch_geometric_gate import GATEConv
from torch_geometric_gate._cli import int_at_least, positive_float
from torch_geometric_gate.utils import (
    plot_self_attention_histogram,
    self_loop_attention,
)

DATASETS = ('Minesweeper', 'Tolokers')  # the two-class sets (ROC AUC)


class Net(torch.nn.Module):
    def __init__(self, conv_cls, in_channels, hidden, out_channels, layers):
        super().__init__()
        sizes = [in_channels] + [hidden] * (layers - 1) + [out_channels]
        self.convs = torch.nn.ModuleList(
            conv_cls(i, o, bias=False) for i, o in zip(sizes[:-1], sizes[1:])
        )

    def forward(self, x, edge_index, return_alpha_vv=False):
        alpha_vv = []
        for i, conv in enumerate(self.convs):
            if return_alpha_vv:
                x, (ei, alpha) = conv(
                    x, edge_index, return_attention_weights=True
                )
                alpha_vv.append(self_loop_attention(ei, alpha, x.size(0)))
            else:
                x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = x.relu()
        return (x, alpha_vv) if return_alpha_vv else x


def load(data_root, name, split):
    raw = osp.join(data_root, name.lower(), 'raw')
    if not osp.isfile(osp.join(raw, f'{name.lower()}.npz')):
        raise FileNotFoundError(
            f"No offline copy of {name} under '{data_root}': expected "
            f"'{osp.join(raw, name.lower() + '.npz')}' (the raw layout of "
            f"PyG's HeterophilousGraphDataset, e.g. a copy of "
            f'../shared/data/heterophilous); nothing is downloaded'
        )
    with tempfile.TemporaryDirectory() as root:  # never write to data_root
        shutil.copytree(raw, osp.join(root, name.lower(), 'raw'))
        data = HeterophilousGraphDataset(root, name)[0]
    for key in ('train_mask', 'val_mask', 'test_mask'):
        data[key] = data[key][:, split]
    return data


def roc_auc(out, y, mask):
    score = out[mask].softmax(dim=-1)[:, 1]
    return float(roc_auc_score(y[mask].numpy(), score.numpy()))


def train(model, data, epochs, lr):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    best_val = test_at_best = float('-inf')
    for _ in range(epochs):
        model.train()
        optimizer.zero_grad()
        out = model(data.x, data.edge_index)
        loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
        loss.backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            out = model(data.x, data.edge_index)
        val = roc_auc(out, data.y, data.val_mask)
        if val > best_val:
            best_val, test_at_best = val, roc_auc(out, data.y, data.test_mask)
    with torch.no_grad():
        _, alpha_vv = model(data.x, data.edge_index, return_alpha_vv=True)
    return float(loss.detach()), best_val, test_at_best, alpha_vv


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--data-root', required=True)
    parser.add_argument('--dataset', choices=DATASETS, default='Minesweeper')
    parser.add_argument('--split', type=int, choices=range(10), default=0)
    parser.add_argument('--num-layers', type=int_at_least(1), default=4)
    parser.add_argument('--hidden-channels', type=int_at_least(1), default=64)
    parser.add_argument('--epochs', type=int_at_least(1), default=200)
    parser.add_argument('--lr', type=positive_float, default=0.005)
    parser.add_argument('--seed', type=int_at_least(0), default=0)
    parser.add_argument('--plot', help='save the alpha_vv histograms here')
    args = parser.parse_args()

    try:
        data = load(args.data_root, args.dataset, args.split)
    except FileNotFoundError as e:
        parser.error(str(e))
    print(
        f'{args.dataset}, split {args.split}: {data.num_nodes} nodes, '
        f'{data.num_edges} edges, train/val/test '
        f'{int(data.train_mask.sum())}/{int(data.val_mask.sum())}/'
        f'{int(data.test_mask.sum())}; {args.num_layers} layers of width '
        f'{args.hidden_channels}, {args.epochs} epochs of Adam '
        f'(lr={args.lr})'
    )
    print(f'{"model":<6} {"loss":>7} {"val AUC":>8} {"test AUC":>8}   '
          f'mean alpha_vv per layer')  # fmt: skip
    figures = {}
    for name, conv_cls in (('GATE', GATEConv), ('GATv2', GATv2Conv)):
        torch.manual_seed(args.seed)
        model = Net(conv_cls, data.num_features, args.hidden_channels, 2,
                    args.num_layers)  # fmt: skip
        loss, val, test, alpha_vv = train(model, data, args.epochs, args.lr)
        layers = '  '.join(
            f'L{i + 1}: {float(a.mean()):.3f}' for i, a in enumerate(alpha_vv)
        )
        print(f'{name:<6} {loss:7.4f} {val:8.4f} {test:8.4f}   {layers}')
        figures[name] = alpha_vv
    if args.plot:
        import matplotlib.pyplot as plt

        root, ext = osp.splitext(args.plot)
        for name, alpha_vv in figures.items():
            path = f'{root}_{name}{ext or ".png"}'
            fig = plot_self_attention_histogram(
                alpha_vv, path, title=f'{name} on {args.dataset}'
            )
            plt.close(fig)
            print(f'Saved {path}')


if __name__ == '__main__':
    main()
