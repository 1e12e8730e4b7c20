r"""Why :class:`RandomGATLabels` defaults to ELU between layers.

For each activation, draws 30 random width-2 label networks (seeds 0-29)
with ``k = 3`` layers on one G(1000, 0.01) graph and counts the seeds whose
output has rank below 2 (a collapsed network) and whose smaller K-means class
holds under 10% of the nodes (a network that puts every node in one
cluster, which the transform refuses, counts as 0%); prints the smallest
class share seen.

    python docs/source/_scripts/random_gat_degeneracy.py
"""

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import erdos_renyi_graph

from torch_geometric_gate.transforms import RandomGATLabels

# The graph the testbed's dense generator draws for seed 0, bit for bit:
torch.manual_seed(0)
edge_index = erdos_renyi_graph(1000, 0.01)
x = torch.randn(1000, 2, generator=torch.Generator().manual_seed(1))
for act in ('relu', 'elu'):
    collapsed, shares = 0, []
    for seed in range(30):
        transform = RandomGATLabels(3, 2, seed=seed, act=act)
        h = transform.embed(x, edge_index)
        collapsed += int(torch.linalg.matrix_rank(h - h.mean(0)) < 2)
        try:
            y = transform(Data(x=x, edge_index=edge_index)).y
        except ValueError:  # all nodes in one cluster: refused
            shares.append(0.0)
            continue
        shares.append(y.bincount(minlength=2).min().item() / y.numel())
    shares = np.array(shares)
    print(
        f'{act}: rank < 2 for {collapsed}/30 seeds, smaller class < 10% '
        f'for {(shares < 0.1).sum()}/30, smallest class {shares.min():.1%}'
    )
