r"""Kernels behind :class:`~torch_geometric_gate.GATEConv`'s attention, and
the switch that selects them (:func:`attention_kernel`).

The layer as PyG ships it (:mod:`torch_geometric_gate.nn.conv.gate_conv`)
is PyG's message passing, the :obj:`'reference'` kernel;
:class:`torch_geometric_gate.GATEConv` overrides its attention step to run
the kernel that the switch selects, handing it tensors only
(:class:`~torch_geometric_gate.ops.types.AttentionGraph`,
:class:`~torch_geometric_gate.ops.types.AttentionParams`).
"""

from .dispatch import KERNELS, attention_kernel
from .types import AttentionGraph, AttentionParams

__all__ = [
    'KERNELS',
    'AttentionGraph',
    'AttentionParams',
    'attention_kernel',
]
