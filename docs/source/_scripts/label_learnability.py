r"""How well a one-layer GATv2 fits k = 1 neighbour-dependent labels.

Trains one ``GATv2Conv(2, 2, bias=False)`` (Adam, lr 0.005, 1500 epochs,
seed 0) and prints the training accuracy it reaches on:

* the authors' k = 1 graph;
* ``NeighborDependentER`` graphs with seeds 0-9 (our defaults);
* graph seed 0 relabelled by ``RandomGATLabels`` with label seeds 0-9,
  with our defaults and with the settings of the authors' generator
  (``../shared/notes/reference-code.md``: ReLU inside the attention,
  PyTorch's default init). The activation between layers is not varied:
  a one-layer network has none.

The argument is the folder of the authors' graphs, as ``--paper-data`` of
``examples/neighbor_dependent.py``, whose loader this script reuses:

    python docs/source/_scripts/label_learnability.py \
        ../shared/data/gate-synthetic
"""

import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.nn import GATv2Conv

from torch_geometric_gate.transforms import RandomGATLabels

sys.path.insert(
    0, os.path.join(os.path.dirname(__file__), '..', '..', '..', 'examples')
)
from neighbor_dependent import load  # noqa: E402


def train_acc(data: Data, epochs: int = 1500) -> float:
    torch.manual_seed(0)
    conv = GATv2Conv(2, 2, bias=False)
    opt = torch.optim.Adam(conv.parameters(), lr=0.005)
    mask = data.train_mask
    for _ in range(epochs):
        opt.zero_grad()
        out = conv(data.x, data.edge_index)
        F.cross_entropy(out[mask], data.y[mask]).backward()
        opt.step()
    return (out.argmax(-1)[mask] == data.y[mask]).float().mean().item()


def report(name: str, accs: list) -> None:
    print(
        f'{name}: {[round(a, 3) for a in accs]}, mean {np.mean(accs):.3f}, '
        f'range {min(accs):.3f}-{max(accs):.3f}',
        flush=True,
    )


def main(paper_data: str) -> None:
    torch.set_num_threads(1)
    tmp_root = tempfile.mkdtemp()
    authors, _ = load(1, paper_data, tmp_root, 0)
    print(f"authors' graph: {train_acc(authors):.3f}", flush=True)
    graphs = [
        load(1, None, os.path.join(tmp_root, f'seed{seed}'), seed)[0]
        for seed in range(10)
    ]
    report('ours, graph seeds 0-9', [train_acc(data) for data in graphs])
    variants = [
        dict(),
        dict(negative_slope=0.0),
        dict(init='torch_default'),
        dict(negative_slope=0.0, init='torch_default'),
    ]
    for kwargs in variants:
        accs = [
            train_acc(RandomGATLabels(1, 2, seed=seed, **kwargs)(graphs[0]))
            for seed in range(10)
        ]
        report(f'ours, graph seed 0, labels {kwargs}, seeds 0-9', accs)


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
