r"""The route from a caller to a kernel, one way: the caller (the layer,
:func:`~torch_geometric_gate.ops.gate_attention`) makes one call,
:func:`attend`, with the graph, the parameters, the projected features and
its reasons why the call cannot leave the reference (what only it knows:
hooks, explain mode, its aggregation and flow); :func:`attend` adds what the
tensors, the autograd state and the switch
(:func:`~torch_geometric_gate.ops.attention_kernel`) tell, picks a kernel
and runs it, or returns :obj:`None` where the caller's reference runs.
"""

import importlib.util
import os
from typing import List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from torch_geometric_gate.ops import _compat
from torch_geometric_gate.ops.switch import KernelSettings, current_settings
from torch_geometric_gate.ops.types import (
    TRITON_DTYPES,
    AttentionGraph,
    AttentionInputs,
    AttentionParams,
)

# Looked up once, at import: `find_spec` takes about 0.1 ms, and
# torch.compile (torch 2.11) cannot trace it; a module constant it reads.
_TRITON_INSTALLED = importlib.util.find_spec('triton') is not None


def _triton_missing(x: Tensor) -> Optional[str]:
    if not _TRITON_INSTALLED:
        return 'Triton is not installed'
    if x.device.type != 'cuda' and not _interpreting():
        return (
            'the input is not on a CUDA device (on a CPU the Triton '
            'kernels run under the interpreter: TRITON_INTERPRET=1, set '
            'before Triton is imported)'
        )
    return None


def _interpreting() -> bool:
    return os.environ.get('TRITON_INTERPRET', '0') == '1'


def select(
    settings: KernelSettings,
    value: Tensor,
    why: Sequence[str],
    num_edges: int,
    dtypes: Sequence[torch.dtype] = (),
) -> str:
    r"""The kernel that :obj:`settings` run a call on projections like
    :obj:`value` and :obj:`num_edges` edges (self-loops included) with,
    :obj:`'reference'` included; :obj:`why` holds the caller's reasons why
    the call cannot leave the reference, :obj:`dtypes` those of its other
    floating-point tensors (all must be Triton's for :obj:`'auto'` to pick
    it). Forcing a kernel that cannot run the call raises a
    :class:`RuntimeError` that says why."""
    name = settings.kernel
    if name == 'reference':
        return name
    reasons: List[str] = list(why)
    if _compat.functorch_active():
        reasons.append('a torch.func transform is active')
    if _compat.forward_ad_active():
        reasons.append('forward-mode AD is active')
    if name == 'auto':
        if reasons:
            return 'reference'
        if value.device.type == 'cpu':
            return 'chunked'
        if (
            value.device.type == 'cuda'
            and num_edges >= settings.triton_min_edges
            and all(d in TRITON_DTYPES for d in (value.dtype, *dtypes))
            and _triton_missing(value) is None
        ):
            return 'triton'
        return 'reference'
    if name == 'triton':
        missing = _triton_missing(value)
        if missing is not None:
            reasons.append(missing)
        wrong = [d for d in (value.dtype, *dtypes) if d not in TRITON_DTYPES]
        if wrong:
            reasons.append(
                'the Triton kernels compute in float32 and take float32, '
                f'bfloat16 or float16 tensors (got {wrong[0]})'
            )
    if reasons:
        raise RuntimeError(
            f"attention_kernel('{name}') cannot run this call: "
            + '; '.join(reasons)
            + ". Use 'auto' to fall back to the reference where needed"
        )
    return name


def attend(
    graph: AttentionGraph,
    params: AttentionParams,
    inputs: AttentionInputs,
    why: Sequence[str] = (),
) -> Optional[Tuple[Tensor, Optional[Tensor]]]:
    r"""GATE's attention on the kernel that the switch selects for this
    call: the aggregated values :obj:`[N_dst, H, C]` and the attention
    weights :obj:`[E, H]` (or :obj:`None` unless
    :obj:`params.need_weights`); :obj:`None` where the reference must run
    (selected, or :obj:`'auto'` and a kernel cannot serve the call)."""
    settings = current_settings()
    others = (inputs.q_src, inputs.q_dst, params.att_neighbor,
              params.att_self, params.weight_edge)  # fmt: skip
    dtypes = [t.dtype for t in others if t is not None]
    kernel = select(settings, inputs.value, why, graph.src.numel(), dtypes)
    if kernel == 'chunked':
        from torch_geometric_gate.ops.chunked import chunked_attention

        return chunked_attention(graph, params, inputs, settings)
    if kernel == 'triton':
        from torch_geometric_gate.ops.triton import triton_attention

        return triton_attention(graph, params, inputs, settings)
    return None
