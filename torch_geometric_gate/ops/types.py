r"""The arguments every attention kernel takes, bundled and named once:
the graph (:class:`AttentionGraph`), the attention parameters
(:class:`AttentionParams`) and the projected node features
(:class:`AttentionInputs`).

:class:`~torch_geometric_gate.GATEConv` and
:func:`~torch_geometric_gate.ops.gate_attention` build them; a kernel
(:mod:`~torch_geometric_gate.ops.chunked`,
:mod:`~torch_geometric_gate.ops.triton`) reads tensors only, never the
layer.
"""

from typing import NamedTuple, Optional, Tuple, Union

import torch
from torch import Tensor

#: The dtypes the Triton kernels take (they compute in float32; float64
#: runs the reference under 'auto').
TRITON_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class AttentionGraph(NamedTuple):
    r"""The edges that GATE attends over, as the layer built them.

    The first :obj:`src.numel() - num_loops` edges are the caller's, in the
    caller's order; the last :obj:`num_loops` edges are the appended
    self-loops :obj:`(i, i)` for :obj:`i < num_loops` (:obj:`0` without
    :obj:`add_self_loops`).
    """

    #: :obj:`[E]` source node of every edge (:obj:`int64`).
    src: Tensor
    #: :obj:`[E]` target node of every edge (:obj:`int64`).
    dst: Tensor
    #: :obj:`[E]` :obj:`True` where an edge is scored with
    #: :math:`\mathbf{a}_t` (:obj:`att_self`), else with
    #: :math:`\mathbf{a}_s`; :obj:`None`: the edges whose :obj:`src` equals
    #: :obj:`dst`.
    loop: Optional[Tensor]
    #: :obj:`[E]` :obj:`True` where an edge takes no part in the softmax, or
    #: :obj:`None` (see :obj:`mask_input_loops`).
    masked: Optional[Tensor]
    num_src: int
    num_dst: int
    #: The number of appended self-loops at the end of :obj:`src`/:obj:`dst`.
    num_loops: int
    #: The caller's :class:`torch_geometric.EdgeIndex` when it passed one
    #: (its cached CSC gives the kernels their CSR without a sort), else
    #: :obj:`None`.
    edge_index: Optional[Tensor] = None
    #: Whether the edges before the last :obj:`num_loops` whose :obj:`src`
    #: equals :obj:`dst` take no part in the softmax either (the input's own
    #: self-loops, as :obj:`add_self_loops` masks them). The layer passes
    #: this and :obj:`loop=None` rather than flags that a kernel can derive
    #: from the edges, in its own loops.
    mask_input_loops: bool = False

    @property
    def loops_masked_before(self) -> int:
        r"""The edges before this index whose :obj:`src` equals :obj:`dst`
        are masked (:obj:`mask_input_loops`; :obj:`0`: none), as
        ``ops.types.edge_flags`` and the chunked operator take it."""
        if not self.mask_input_loops:
            return 0
        return self.src.numel() - self.num_loops

    def flags(self) -> Tuple[Tensor, Optional[Tensor]]:
        r"""The :obj:`[E]` flags :obj:`loop` and :obj:`masked` (or
        :obj:`None`: no edge masked) as tensors, whatever form holds
        them."""
        return edge_flags(
            self.src, self.dst, self.loop, self.masked,
            self.loops_masked_before or None,
        )  # fmt: skip


def edge_flags(
    src: Tensor,
    dst: Tensor,
    loop: Optional[Tensor],
    masked: Optional[Tensor],
    loops_masked_before: Optional[Union[int, Tensor]],
) -> Tuple[Tensor, Optional[Tensor]]:
    r"""The :obj:`[E]` flags :obj:`loop` (scored with :math:`\mathbf{a}_t`)
    and :obj:`masked` (no part in the softmax; :obj:`None`: no edge) from
    the operators' form: :obj:`loop=None` flags the edges whose :obj:`src`
    equals :obj:`dst`, and the edges before :obj:`loops_masked_before` (an
    :obj:`int` or a 0-dim tensor; :obj:`None`: no edge) whose :obj:`src`
    equals :obj:`dst` are masked too (see
    :attr:`AttentionGraph.mask_input_loops`). The chunked kernels' compiled
    loops derive the flags as they read the edges, and backward from the
    saved edge index, instead of reading (and saving) them."""
    if loop is None:
        loop = src == dst
    if loops_masked_before is not None:
        before = torch.arange(src.numel(), device=src.device)
        input_loop = (src == dst) & (before < loops_masked_before)
        masked = input_loop if masked is None else masked | input_loop
    return loop, masked


class AttentionParams(NamedTuple):
    r"""The layer's attention parameters and settings."""

    #: :math:`\mathbf{a}_s`, :obj:`[1, H, C]`.
    att_neighbor: Tensor
    #: :math:`\mathbf{a}_t`, :obj:`[1, H, C]`.
    att_self: Tensor
    #: :math:`\mathbf{W}_e`, :obj:`[H * C, D]`, or :obj:`None`.
    weight_edge: Optional[Tensor]
    #: :math:`\phi`'s negative slope, :obj:`0` for the paper's ReLU.
    negative_slope: float
    #: Dropout on the attention weights when :obj:`training`.
    dropout: float
    training: bool
    #: Whether the caller needs the :obj:`[E, H]` attention weights; a
    #: kernel may return :obj:`None` for them otherwise.
    need_weights: bool = True
    #: With :obj:`need_weights`: whether the caller reads only the weights
    #: of the graph's :obj:`num_loops` appended self-loops (the last rows,
    #: row :obj:`v` the loop :obj:`(v, v)`, as :class:`AttentionGraph`
    #: defines them). A kernel may then return those rows alone,
    #: :obj:`[num_loops, H]`, instead of all :obj:`[E, H]`: the caller
    #: takes the last :obj:`num_loops` rows of what it gets (the Triton
    #: kernels write :obj:`N x H` instead of :obj:`E x H`).
    loop_weights_only: bool = False


class AttentionInputs(NamedTuple):
    r"""The projected node features (and edge features) that GATE attends
    over."""

    #: :math:`\mathbf{U} \mathbf{x}` of the source nodes,
    #: :obj:`[N_src, H, C]`.
    q_src: Tensor
    #: :math:`\mathbf{V} \mathbf{x}` of the target nodes,
    #: :obj:`[N_dst, H, C]`.
    q_dst: Tensor
    #: :math:`\mathbf{W} \mathbf{x}` of the source nodes (the values),
    #: :obj:`[N_src, H, C]`.
    value: Tensor
    #: Edge features :obj:`[E, D]` (used with
    #: :attr:`AttentionParams.weight_edge`), or :obj:`None`.
    edge_attr: Optional[Tensor] = None
    #: The :obj:`[N, 3 H C]` product whose views are :obj:`value`,
    #: :obj:`q_src` and :obj:`q_dst` (:func:`projection_product`: the
    #: layer's one projection product), or :obj:`None`. Given, a kernel
    #: may differentiate it in their place (the Triton kernels write its
    #: gradient in place: no stack of three gradients into a copy); so
    #: give it only where nothing asks for the views' own gradients
    #: (their hooks, or :func:`torch.autograd.grad` of the views).
    product: Optional[Tensor] = None


def projection_product(
    q_src: Tensor, q_dst: Tensor, value: Tensor
) -> Optional[Tensor]:
    r"""The :obj:`[N, 3 H C]` tensor whose views :obj:`value, q_src, q_dst`
    are, in this order and each :obj:`[N, H, C]` (as
    :class:`~torch_geometric_gate.GATEConv` projects), or :obj:`None`: no
    operator, the views' metadata alone. :obj:`None` under
    :func:`torch.compile`, whose operators take the three projections (and
    whose graphs hold no storage offsets)."""
    if torch.compiler.is_compiling():
        return None
    base = value._base
    if base is None or q_src._base is not base or q_dst._base is not base:
        return None
    num, heads, channels = value.shape
    width = heads * channels
    if base.shape != (num, 3 * width) or not base.is_contiguous():
        return None
    first = base.storage_offset()
    for i, t in enumerate((value, q_src, q_dst)):
        if t.shape != value.shape or t.stride() != (3 * width, channels, 1):
            return None
        if t.storage_offset() != first + i * width:
            return None
    return base
