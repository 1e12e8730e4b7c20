r"""Which :obj:`[E, H, C]` tensors does a compiled GATEConv training step
write, and which does it save for backward?

Compiles one GATEConv layer (8 heads of 8 channels) on a random graph,
captures the code Inductor generates for one training step with
:func:`torch._inductor.utils.run_and_get_code`, and counts, per generated
module (forward, then backward), the buffers it allocates with
:math:`E \times H \times C` elements (:math:`E` counts the appended
self-loops). Also counts the saved-for-backward tensors of that size
(:class:`torch.autograd.graph.saved_tensors_hooks`), and lists the
reductions that the generated code leaves to ATen's ``scatter_reduce_``::

    python docs/source/_scripts/compiled_buffers.py
"""

import re
import warnings

import torch
from torch._inductor.utils import run_and_get_code

from torch_geometric_gate import GATEConv

warnings.filterwarnings('ignore', category=DeprecationWarning)
torch.manual_seed(0)
num_nodes, heads, channels = 1000, 8, 8
x = torch.randn(num_nodes, 32)
edge_index = torch.randint(num_nodes, (2, 20000))
edge_index = edge_index[:, edge_index[0] != edge_index[1]]
num_edges = edge_index.size(1) + num_nodes  # With the appended self-loops.
conv = torch.compile(GATEConv(32, channels, heads=heads), fullgraph=True)

saved = []


def pack(t):
    saved.append(t.numel())
    return t


def step():
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = conv(x, edge_index)
    out.sum().backward()


_, codes = run_and_get_code(step)
edge_size = num_edges * heads * channels
shape = re.compile(r'empty_strided_cpu\(\(([0-9, ]+)\)')
fallback = re.compile(r"aten\.scatter_reduce_\.two\(.*reduce='(\w+)'")
for name, code in zip(('forward', 'backward'), codes):
    sizes = [
        [int(d) for d in m.group(1).split(',') if d.strip()]
        for m in shape.finditer(code)
    ]
    count = sum(1 for s in sizes if torch.Size(s).numel() == edge_size)
    fallbacks = fallback.findall(code)
    print(
        f'{name}: {count} buffer(s) of [E, H, C] = [{num_edges}, {heads}, '
        f'{channels}]; left to ATen scatter_reduce_: {fallbacks}'
    )
print(
    f'saved for backward: {sum(n == edge_size for n in saved)} tensor(s) '
    f'of [E, H, C]; largest saved: {max(saved)} elements'
)
