r"""How well a one-layer GATv2 fits k = 1 neighbour-dependent labels.

Trains one ``GATv2Conv(2, 2, bias=False)`` (Adam, lr 0.005, 1500 epochs,
seed 0) on the authors' k = 1 graph and on ``NeighborDependentER`` graphs,
with our generator's defaults and with single settings of the authors'
generator (``../shared/notes/reference-code.md``: ReLU, ReLU inside the
attention, PyTorch's default init), and prints the training accuracy.

    python docs/source/_scripts/label_learnability.py \
        ../shared/data/gate-synthetic/neighbor_dependent_k1.npz
"""

import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.nn import GATv2Conv

from torch_geometric_gate.datasets import NeighborDependentER
from torch_geometric_gate.transforms import RandomGATLabels


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


def main(npz_path: str) -> None:
    z = np.load(npz_path)
    authors = Data(
        x=torch.from_numpy(z['x']).float(),
        edge_index=torch.from_numpy(z['edge_index']).long(),
        y=torch.from_numpy(z['y']).long(),
        train_mask=torch.from_numpy(z['train_mask']).bool(),
    )
    print(f"authors' graph: {train_acc(authors):.3f}")
    graphs = [
        NeighborDependentER(tempfile.mkdtemp(), seed=seed)[0]
        for seed in range(5)
    ]
    for seed, data in enumerate(graphs):
        print(f'ours, graph seed {seed}: {train_acc(data):.3f}')
    data = graphs[0]
    variants = [
        dict(act='relu'),
        dict(negative_slope=0.0),
        dict(init='torch_default'),
        dict(act='relu', negative_slope=0.0, init='torch_default'),
    ]
    for kwargs in variants:
        accs = []
        for seed in range(3):
            labelled = RandomGATLabels(1, 2, seed=seed, **kwargs)(data.clone())
            accs.append(f'{train_acc(labelled):.3f}')
        print(f'ours, graph seed 0, labels {kwargs}, seeds 0-2: {accs}')


if __name__ == '__main__':
    main(sys.argv[1])
