r"""The switch that selects the kernel behind
:class:`~torch_geometric_gate.GATEConv`'s attention.

:func:`attention_kernel` sets it, as :func:`torch.nn.attention.sdpa_kernel`
does for scaled dot-product attention, per thread and per
:mod:`contextvars` context. The layer says why a call cannot leave the
reference (what only it knows: hooks, explain mode, its aggregation and
flow); :func:`_select_kernel` adds what the tensors and the autograd state
tell, and picks; :func:`_run_kernel` runs the pick on tensors only.
"""

import contextlib
import contextvars
import importlib.util
import os
from typing import Iterator, List, Optional, Tuple

import torch
from torch import Tensor

from torch_geometric_gate.ops.types import AttentionGraph, AttentionParams

#: The kernels :func:`attention_kernel` accepts.
KERNELS = ('auto', 'reference', 'chunked', 'triton')

#: From how many edges (self-loops included) :obj:`'auto'` runs the Triton
#: kernels on CUDA rather than the reference. Measured on an H100
#: (``benchmark/results/h100-kernels-*.md``): at 10^4 and 10^5 edges the
#: reference's training step took 2.0-2.9 ms and Triton's 3.1-4.9 ms (both
#: bound by launches, not by the GPU); from 10^6 edges Triton took 0.35-0.76x
#: :class:`~torch_geometric.nn.conv.GATv2Conv`'s step and the reference
#: 1.05-1.13x, and at 1.2 * 10^8 edges only Triton and the chunked kernels
#: fit. The crossing between 10^5 and 10^6 was not measured.
TRITON_MIN_EDGES = 2**18

# What the Triton kernels take (they compute in float32; float64 runs the
# reference under 'auto'):
_TRITON_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

_KERNEL: contextvars.ContextVar[str] = contextvars.ContextVar(
    'attention_kernel', default='auto'
)


@contextlib.contextmanager
def attention_kernel(name: str) -> Iterator[None]:
    r"""Selects the kernel of :class:`~torch_geometric_gate.GATEConv`'s
    attention within a :obj:`with` block, for the current thread (and
    :mod:`contextvars` context: other threads and :mod:`asyncio` tasks keep
    their own).

    * :obj:`'auto'` (the default): the chunked kernels on CPU tensors; on
      CUDA the Triton kernels from :data:`TRITON_MIN_EDGES` edges (the
      reference below, faster on small graphs, and for float64), under
      :func:`torch.compile` too (the kernels are custom operators); the
      reference on other devices, and wherever the kernels do not apply:
      under a :mod:`torch.func` transform or forward-mode AD
      (:mod:`torch.autograd.forward_ad`), in explain mode, with
      message-passing hooks registered (a kernel would skip them), with
      another aggregation than a sum, the
      :obj:`target_to_source` flow, a negative slope, or edge features
      before a lazy :obj:`edge_dim` is initialized.
    * :obj:`'reference'`: PyG's message passing, :meth:`edge_updater` and
      :meth:`propagate` (the layer as PyG ships it; hooks, explainers,
      TorchScript, :func:`torch.compile` and :mod:`torch.func` all work).
    * :obj:`'chunked'`: the memory-lean kernels of
      ``torch_geometric_gate.ops.chunked``. On CPU tensors, with up to
      four threads, they run loops that Inductor compiles (a C++ compiler
      is needed; the first call of a setting compiles for seconds), eager
      and under :func:`torch.compile` alike; elsewhere, or without a
      working compiler (a warning says so), chunks of ATen operations.
    * :obj:`'triton'`: the fused GPU kernels of
      ``torch_geometric_gate.ops.triton`` (CPU tensors under
      :obj:`TRITON_INTERPRET=1`).

    Forcing a kernel that cannot run a call raises a :class:`RuntimeError`
    that says why. Double backward works with every kernel.

    Example:
        >>> import torch
        >>> from torch_geometric_gate import GATEConv, attention_kernel
        >>> conv = GATEConv(8, 4)
        >>> x, edge_index = torch.randn(3, 8), torch.tensor([[0, 1], [1, 2]])
        >>> with attention_kernel('reference'):
        ...     out = conv(x, edge_index)
        >>> torch.allclose(out, conv(x, edge_index), atol=1e-6)
        True
    """
    if name not in KERNELS:
        raise ValueError(
            f'Unknown attention kernel {name!r}; expected one of {KERNELS}'
        )
    token = _KERNEL.set(name)
    try:
        yield
    finally:
        _KERNEL.reset(token)


# Looked up once, at import: `find_spec` takes about 0.1 ms, and
# torch.compile (torch 2.11) cannot trace it; a module constant it reads.
_TRITON_INSTALLED = importlib.util.find_spec('triton') is not None


def _triton_missing(x: Tensor) -> Optional[str]:
    if not _TRITON_INSTALLED:
        return 'Triton is not installed'
    if x.device.type != 'cuda' and not _interpreting():
        return 'the input is not on a CUDA device'
    return None


def _interpreting() -> bool:
    return os.environ.get('TRITON_INTERPRET', '0') == '1'


def _forward_ad_active() -> bool:
    # Inside `forward_ad.dual_level()` (dual tensors exist only there):
    return torch.autograd.forward_ad._current_level >= 0


@torch.compiler.assume_constant_result
def _selected() -> str:
    # Read when torch.compile traces (it cannot trace `ContextVar.get`):
    return _KERNEL.get()


def _select_kernel(value: Tensor, why: List[str], num_edges: int) -> str:
    r"""Returns the kernel that a call of the layer on projections like
    :obj:`value` and :obj:`num_edges` edges (self-loops included) runs,
    :obj:`'reference'` included; :obj:`why` holds the layer's reasons why
    its call cannot leave the reference."""
    name = _selected()
    if name == 'reference':
        return name
    why = list(why)
    if torch._C._are_functorch_transforms_active():
        why.append('a torch.func transform is active')
    if _forward_ad_active():
        why.append('forward-mode AD is active')
    if name == 'auto':
        if why:
            return 'reference'
        if value.device.type == 'cpu':
            return 'chunked'
        if (
            value.device.type == 'cuda'
            and num_edges >= TRITON_MIN_EDGES
            and value.dtype in _TRITON_DTYPES
            and _triton_missing(value) is None
        ):
            return 'triton'
        return 'reference'
    if name == 'triton':
        missing = _triton_missing(value)
        if missing is not None:
            why.append(missing)
    if why:
        raise RuntimeError(
            f"attention_kernel('{name}') cannot run this call: "
            + '; '.join(why)
            + ". Use 'auto' to fall back to the reference where needed"
        )
    return name


def _run_kernel(
    kernel: str,
    graph: AttentionGraph,
    params: AttentionParams,
    q_src: Tensor,
    q_dst: Tensor,
    value: Tensor,
    edge_attr: Optional[Tensor],
) -> Tuple[Optional[Tensor], Tensor]:
    r"""Runs GATE's attention with :obj:`kernel` (:obj:`'chunked'` or
    :obj:`'triton'`) and returns the attention weights :obj:`[E, H]` (or
    :obj:`None` unless :obj:`params.need_weights`) and the aggregated values
    :obj:`[N_dst, H, C]`."""
    if kernel == 'chunked':
        from torch_geometric_gate.ops.chunked import chunked_attention

        return chunked_attention(graph, params, q_src, q_dst, value, edge_attr)
    if kernel == 'triton':
        from torch_geometric_gate.ops.triton import triton_attention

        return triton_attention(graph, params, q_src, q_dst, value, edge_attr)
    raise ValueError(f'No attention kernel {kernel!r} to run')
