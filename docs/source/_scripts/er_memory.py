r"""Peak RSS and time of drawing one Erdős–Rényi graph of mean degree 10.

Run one method and size per process (the peak RSS is the process's)::

    python docs/source/_scripts/er_memory.py sparse 1e6
    python docs/source/_scripts/er_memory.py dense 1e4
    python docs/source/_scripts/er_memory.py pyg 1e4  # PyG's, O(N^2)
"""

import argparse
import resource
import time

import torch
from torch_geometric.utils import erdos_renyi_graph

from torch_geometric_gate.datasets import er_graph

parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
parser.add_argument('method', choices=['sparse', 'dense', 'pyg'])
parser.add_argument('num_nodes', type=float)
args = parser.parse_args()
n = int(args.num_nodes)
p = 10 / (n - 1)
t = time.perf_counter()
if args.method == 'pyg':
    torch.manual_seed(0)
    edge_index = erdos_renyi_graph(n, p)
else:
    edge_index = er_graph(n, p, 0, args.method)
seconds = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(
    f'{args.method} N={n}: {edge_index.size(1)} directed edges, '
    f'{seconds:.2f} s, peak RSS {peak:.0f} MB'
)
