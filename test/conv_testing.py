r"""What the GATEConv tests share: a small graph and random attention."""

import os
from typing import Dict

import torch
from torch import Tensor

from torch_geometric_gate import GATEConv

# A small graph with a self-loop (2 -> 2), a duplicate edge (0 -> 1 twice),
# a node without in-edges (4) and an isolated node (5):
EDGE_INDEX = torch.tensor(
    [
        [0, 0, 1, 2, 2, 3, 1, 3],
        [1, 1, 0, 2, 3, 0, 2, 2],
    ]
)
NUM_NODES = 6


def kernel_device(kernel: str) -> torch.device:
    r"""Where a test runs :obj:`kernel`: the Triton kernels on the GPU where
    they compile for it (CUDA, :obj:`TRITON_INTERPRET` unset), every other
    kernel and the interpreter on the CPU."""
    interpreting = os.environ.get('TRITON_INTERPRET') == '1'
    if kernel == 'triton' and torch.cuda.is_available() and not interpreting:
        return torch.device('cuda')
    return torch.device('cpu')


def randomize_attention(conv: GATEConv, scale: float = 1.0):
    r"""Draws both attention vectors from :math:`\mathcal{N}(0, scale^2)`
    (zero, their initial value, is uniform attention) and the bias from
    :math:`\mathcal{N}(0, 1)`.
    """
    with torch.no_grad():
        conv.att_neighbor.normal_(0.0, scale)
        conv.att_self.normal_(0.0, scale)
        if conv.bias is not None:
            conv.bias.normal_()


def selected_kernel(
    conv: GATEConv, x: torch.Tensor, num_edges: int = 100
) -> str:
    r"""The kernel that a call of :obj:`conv` on node features like :obj:`x`
    and :obj:`num_edges` edges runs under the current
    :func:`attention_kernel` (its private choice)."""
    from torch_geometric_gate.ops import current_settings
    from torch_geometric_gate.ops.dispatch import select

    return select(current_settings(), x, conv._reference_only(), num_edges)


def saved_bytes(module, *args) -> int:
    r"""Bytes of the distinct storages saved for backward by one forward
    :obj:`module(*args)`."""
    storages: Dict[int, int] = {}

    def pack(t: Tensor) -> Tensor:
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        # Not `t`: a saved output would hold its own graph in a cycle.
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        module(*args)
    return sum(storages.values())
