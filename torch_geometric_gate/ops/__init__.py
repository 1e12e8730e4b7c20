r"""Kernels behind :class:`~torch_geometric_gate.GATEConv`'s attention, and
the switch that selects them (:func:`attention_kernel`).

The layer itself (:mod:`torch_geometric_gate.nn.conv.gate_conv`) is PyG's
message passing, the :obj:`'reference'` kernel; it hands the attention to
:func:`attend` (through :func:`kernel_attention`) when :func:`select_kernel`
picks another kernel.
"""

from .dispatch import (
    KERNELS,
    attend,
    attention_kernel,
    kernel_attention,
    select_kernel,
)

__all__ = [
    'KERNELS',
    'attend',
    'attention_kernel',
    'kernel_attention',
    'select_kernel',
]
