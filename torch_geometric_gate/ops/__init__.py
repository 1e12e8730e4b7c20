r"""GATE's attention kernels, the switch that selects them
(:func:`attention_kernel`) and the attention as a function on tensors
(:func:`gate_attention`).

One folder per kernel family, each owning its operators (registration, CPU
and CUDA kernels, autograd, fake implementation):
``ops/chunked/`` (the chunked ATen loops and the compiled CPU loops) and
``ops/triton/`` (the Triton kernels). The route is one way: a caller
(:class:`~torch_geometric_gate.GATEConv`, :func:`gate_attention`) makes one
call (:func:`~torch_geometric_gate.ops.dispatch.attend`), which selects and
runs a kernel; the kernels take tensors only
(:class:`AttentionGraph`, :class:`AttentionParams`,
:class:`AttentionInputs`).
"""

from .functional import gate_attention
from .switch import KERNELS, KernelSettings, attention_kernel, current_settings
from .types import (
    AttentionGraph,
    AttentionInputs,
    AttentionParams,
    projection_product,
)

__all__ = [
    'KERNELS',
    'AttentionGraph',
    'AttentionInputs',
    'AttentionParams',
    'KernelSettings',
    'attention_kernel',
    'current_settings',
    'gate_attention',
    'projection_product',
]
