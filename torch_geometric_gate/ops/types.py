r"""The arguments every attention kernel takes, bundled.

:class:`~torch_geometric_gate.GATEConv` builds them from its inputs and its
parameters; a kernel (:mod:`~torch_geometric_gate.ops.chunked`,
:mod:`~torch_geometric_gate.ops.triton`) reads tensors only, never the
layer.
"""

from typing import NamedTuple, Optional

from torch import Tensor


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
    #: :math:`\mathbf{a}_t` (:obj:`att_self`), else with :math:`\mathbf{a}_s`.
    loop: Tensor
    #: :obj:`[E]` :obj:`True` where an edge takes no part in the softmax
    #: (the input's own self-loops under :obj:`add_self_loops`), or
    #: :obj:`None`.
    masked: Optional[Tensor]
    num_src: int
    num_dst: int
    #: The number of appended self-loops at the end of :obj:`src`/:obj:`dst`.
    num_loops: int
    #: The caller's :class:`torch_geometric.EdgeIndex` when it passed one
    #: (its cached CSC gives the kernels their CSR without a sort), else
    #: :obj:`None`.
    edge_index: Optional[Tensor] = None


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
