r"""What the synthetic tasks measure: a logistic regression on a node's own
features against one on the mean of its neighbors' features (test
accuracy, trained on the 500 training nodes), averaged over seeds 0-2 of
``SelfSufficientER`` (its features are one-hot labels, as the paper's) and
0-4 of ``NeighborDependentER``; with ``--paper-data``, also on the
authors' graphs (``neighbor_dependent_k{1,2,3}.npz``, as
``gate_paper.table2`` reads them).

    python docs/source/_scripts/learnability.py [--paper-data DIR]
"""

import argparse
import os.path as osp
import tempfile

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from torch_geometric.data import Data
from torch_geometric.utils import scatter

from torch_geometric_gate.datasets import NeighborDependentER, SelfSufficientER


def accuracy(features, data) -> float:
    model = LogisticRegression(max_iter=1000)
    model.fit(features[data.train_mask], data.y[data.train_mask])
    return model.score(features[data.test_mask], data.y[data.test_mask])


def row(name, graphs) -> None:
    own, mean = [], []
    for data in graphs:
        x = data.x.double()
        src, dst = data.edge_index
        neighbors = scatter(x[src], dst, 0, data.num_nodes, reduce='mean')
        own.append(accuracy(x.numpy(), data))
        mean.append(accuracy(neighbors.numpy(), data))
    print(f'{name:34s} own {np.mean(own):.3f}  mean of neighbors '
          f'{np.mean(mean):.3f}')  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--paper-data', help="the authors' .npz graphs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        for classes in (2, 4):
            row(f'SelfSufficientER, C = {classes}', [
                SelfSufficientER(root, num_classes=classes, seed=seed)[0]
                for seed in range(3)
            ])  # fmt: skip
        for k in (1, 2, 3):
            row(f'NeighborDependentER, k = {k}', [
                NeighborDependentER(root, num_layers=k, seed=seed)[0]
                for seed in range(5)
            ])  # fmt: skip
    if args.paper_data:
        for k in (1, 2, 3):
            path = osp.join(args.paper_data, f'neighbor_dependent_k{k}.npz')
            arrays = np.load(path)
            data = Data(**{key: torch.from_numpy(arrays[key])
                           for key in arrays.files})  # fmt: skip
            row(f"authors' graph, k = {k}", [data])


if __name__ == '__main__':
    main()
