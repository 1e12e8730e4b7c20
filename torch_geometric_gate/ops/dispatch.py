r"""The switch that selects the kernel behind :class:`GATEConv`'s attention.

:func:`attention_kernel` sets it, as :func:`torch.nn.attention.sdpa_kernel`
does for scaled dot-product attention; :func:`select_kernel` decides, in one
place, which kernel a call of the layer runs; :func:`attend` runs it, and
:func:`kernel_attention` is the layer's hand-off to both.
"""

import contextlib
import importlib.util
import os
from typing import Iterator, List, Optional, Tuple

import torch
from torch import Tensor

#: The kernels :func:`attention_kernel` accepts.
KERNELS = ('auto', 'reference', 'chunked', 'triton')

#: Whether the Triton kernels have passed the test suite on a GPU; until
#: then :obj:`'auto'` never picks them (the Triton interpreter accepts code
#: that a GPU compiler may reject; the tests compile them for sm_80 and
#: sm_90 without a GPU, but compiling is not running).
TRITON_VERIFIED_ON_GPU = False

_selected = ['auto']


@contextlib.contextmanager
def attention_kernel(name: str) -> Iterator[None]:
    r"""Selects the kernel of :class:`~torch_geometric_gate.GATEConv`'s
    attention within a :obj:`with` block.

    * :obj:`'auto'` (the default): the fastest kernel that applies to the
      call (see :func:`select_kernel`), else the reference.
    * :obj:`'reference'`: PyG's message passing, :meth:`edge_updater` and
      :meth:`propagate` (the layer as PyG ships it; hooks, explainers,
      TorchScript, :func:`torch.compile` and :mod:`torch.func` all work).
    * :obj:`'chunked'`: the memory-lean eager kernels of
      ``torch_geometric_gate.ops.chunked``.
    * :obj:`'triton'`: the fused GPU kernels of
      ``torch_geometric_gate.ops.triton`` (CPU tensors under
      :obj:`TRITON_INTERPRET=1`).

    Forcing a kernel that cannot run a call raises a :class:`RuntimeError`
    that says why.

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
    previous = _selected[0]
    _selected[0] = name
    try:
        yield
    finally:
        _selected[0] = previous


# MessagePassing's hook dictionaries (the module's own forward hooks wrap the
# whole call, and run the same with every kernel):
_HOOKS = tuple(
    f'_{stage}_forward{pre}_hooks'
    for stage in (
        'propagate',
        'message',
        'aggregate',
        'message_and_aggregate',
        'edge_update',
    )
    for pre in ('_pre', '')
)


def _hooked(conv) -> bool:
    return any(len(getattr(conv, name)) > 0 for name in _HOOKS)


def _triton_missing(x: Tensor) -> Optional[str]:
    if importlib.util.find_spec('triton') is None:
        return 'Triton is not installed'
    if x.device.type != 'cuda' and not _interpreting():
        return 'the input is not on a CUDA device'
    return None


def _interpreting() -> bool:
    return os.environ.get('TRITON_INTERPRET', '0') == '1'


def select_kernel(conv, x: Tensor) -> str:
    r"""Returns the kernel that a call of :obj:`conv` on node features like
    :obj:`x` runs: the one :func:`attention_kernel` selects, or, under
    :obj:`'auto'`, :obj:`'triton'` for CUDA tensors (once the Triton
    kernels have passed on a GPU, :data:`TRITON_VERIFIED_ON_GPU`), else
    :obj:`'chunked'`. The reference runs wherever the kernels do not apply:
    under :func:`torch.compile` or a :mod:`torch.func` transform, in
    explain mode, with message-passing hooks registered (a kernel would skip
    them), with another aggregation than a sum, the
    :obj:`target_to_source` flow, :obj:`decomposed_layers > 1`, a negative
    slope, or edge features before a lazy :obj:`edge_dim` is initialized.
    Double backward works with every kernel.
    """
    name = _selected[0]
    if name == 'reference':
        return name
    why: List[str] = []
    if torch.compiler.is_compiling():
        if name == 'auto':  # Nothing else to trace.
            return 'reference'
        why.append('torch.compile is tracing the layer')
    if torch._C._are_functorch_transforms_active():
        why.append('a torch.func transform is active')
    if conv.explain:
        why.append('the layer is in explain mode')
    if _hooked(conv):
        why.append('message-passing hooks are registered')
    if conv.aggr not in ('add', 'sum'):
        why.append(f"aggr='{conv.aggr}' is not a sum")
    if conv.flow != 'source_to_target':
        why.append(f"flow='{conv.flow}'")
    if conv.decomposed_layers > 1:
        why.append('decomposed_layers > 1')
    if conv.negative_slope < 0:
        why.append('negative_slope < 0')
    if conv.lin_edge is not None and isinstance(
        conv.lin_edge.weight, torch.nn.parameter.UninitializedParameter
    ):
        why.append("the lazy 'edge_dim' is not initialized yet")
    if name == 'auto':
        if why:
            return 'reference'
        if (
            TRITON_VERIFIED_ON_GPU
            and x.device.type == 'cuda'
            and _triton_missing(x) is None
        ):
            return 'triton'
        return 'chunked'
    if name == 'triton':
        missing = _triton_missing(x)
        if missing is not None:
            why.append(missing)
    if why:
        raise RuntimeError(
            f"attention_kernel('{name}') cannot run this call: "
            + '; '.join(why)
            + ". Use 'auto' to fall back to the reference where needed"
        )
    return name


@torch.jit.unused
def attend(
    kernel: str,
    src: Tensor,
    dst: Tensor,
    q_src: Tensor,
    q_dst: Tensor,
    value: Tensor,
    edge_attr: Optional[Tensor],
    weight_edge: Optional[Tensor],
    loop: Tensor,
    masked: Optional[Tensor],
    att_neighbor: Tensor,
    att_self: Tensor,
    negative_slope: float,
    dropout: float,
    training: bool,
    num_dst: int,
    graph_anchor: Optional[Tuple[Tensor, object]] = None,
) -> Tuple[Tensor, Tensor]:
    r"""Runs GATE's attention with :obj:`kernel` (not :obj:`'reference'`,
    which is the layer's own message passing) and returns the attention
    weights :obj:`[E, H]` and the aggregated values :obj:`[N_dst, H, C]`.

    Args:
        src, dst (torch.Tensor): The source and target node of every edge,
            self-loops included.
        q_src, q_dst (torch.Tensor): :math:`\mathbf{U} \mathbf{x}` of the
            source nodes and :math:`\mathbf{V} \mathbf{x}` of the target
            nodes, :obj:`[N, H, C]`.
        value (torch.Tensor): :math:`\mathbf{W} \mathbf{x}` of the source
            nodes, :obj:`[N_src, H, C]`.
        edge_attr (torch.Tensor, optional): Edge features :obj:`[E, D]`,
            with :obj:`weight_edge` :obj:`[H * C, D]` their projection.
        loop (torch.Tensor): :obj:`[E]`, :obj:`True` where an edge is scored
            with :obj:`att_self` (:math:`\mathbf{a}_t`), else with
            :obj:`att_neighbor` (:math:`\mathbf{a}_s`), each :obj:`[1, H, C]`.
        masked (torch.Tensor, optional): :obj:`[E]`, :obj:`True` where an
            edge takes no part in the softmax (attention exactly 0).
        negative_slope (float): :math:`\phi`'s slope, :obj:`0` for ReLU.
        dropout (float): Dropout on the attention weights when
            :obj:`training`.
        num_dst (int): The number of target nodes.
        graph_anchor ((torch.Tensor, object), optional): A tensor and a tag
            of which :obj:`src` and :obj:`dst` are a function alone: the
            Triton kernels cache their CSR on it instead of on
            :obj:`src` and :obj:`dst`.
    """
    args = (
        src, dst, q_src, q_dst, value, edge_attr, weight_edge, loop, masked,
        att_neighbor, att_self, negative_slope, dropout, training, num_dst,
    )  # fmt: skip
    if kernel == 'chunked':
        from torch_geometric_gate.ops.chunked import chunked_attention

        return chunked_attention(*args)
    if kernel == 'triton':
        from torch_geometric_gate.ops.triton import triton_attention

        return triton_attention(*args, graph_anchor)
    raise ValueError(f'No attention kernel {kernel!r} to run')


@torch.jit.unused
def kernel_attention(
    conv,
    input_edge_index,
    edge_index: Tensor,
    q: Tuple[Tensor, Tensor],
    value: Tensor,
    edge_attr: Optional[Tensor],
    loop: Tensor,
    masked: Optional[Tensor],
) -> Optional[Tuple[Tensor, Tensor]]:
    r""":class:`~torch_geometric_gate.GATEConv`'s hand-off: :obj:`None`
    where :func:`select_kernel` picks the :obj:`'reference'` (the layer then
    runs its own message passing), else the attention weights and the
    aggregated values of the selected kernel, from :func:`attend` with the
    layer's parameters (:obj:`q` is :obj:`(q_src, q_dst)`, :obj:`edge_index`
    the :obj:`[2, E]` edges, self-loops included, built from the layer's
    :obj:`input_edge_index`, on which a dense one caches the Triton
    kernels' CSR).
    """
    kernel = select_kernel(conv, value)
    if kernel == 'reference':
        return None
    w_edge = None if conv.lin_edge is None else conv.lin_edge.weight
    anchor = None
    if isinstance(input_edge_index, Tensor) and (
        input_edge_index.layout == torch.strided
    ):
        anchor = (input_edge_index, conv.add_self_loops)
    return attend(
        kernel, edge_index[0], edge_index[1], q[0], q[1], value, edge_attr,
        w_edge, loop, masked, conv.att_neighbor, conv.att_self,
        conv.negative_slope, conv.dropout, conv.training, q[1].size(0),
        anchor,
    )  # fmt: skip
