r"""GATE's attention as a function on tensors,
:func:`gate_attention`, as
:func:`torch.nn.functional.scaled_dot_product_attention` is for dense
attention: any layer that
scores edges GATE's or GATv2's way runs on the memory-lean kernels
through it."""

import numbers
from typing import Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric import EdgeIndex
from torch_geometric.index import ptr2index
from torch_geometric.utils import scatter, softmax

from torch_geometric_gate.ops._checks import (
    assert_rows_in_range,
    sparse_size_fits,
)
from torch_geometric_gate.ops._compat import assert_async
from torch_geometric_gate.ops.dispatch import attend
from torch_geometric_gate.ops.types import (
    AttentionGraph,
    AttentionInputs,
    AttentionParams,
)


def gate_attention(
    query_src: Tensor,
    query_dst: Tensor,
    value: Tensor,
    edge_index: Union[Tensor, Tuple[Tensor, Tensor]],
    att_src: Tensor,
    att_self: Optional[Tensor] = None,
    *,
    edge_attr: Optional[Tensor] = None,
    weight_edge: Optional[Tensor] = None,
    negative_slope: float = 0.0,
    dropout_p: float = 0.0,
    need_weights: bool = False,
    loop: Optional[Tensor] = None,
    masked: Optional[Tensor] = None,
    mask_loops_before: Optional[int] = None,
) -> Tuple[Tensor, Optional[Tensor]]:
    r"""GATE's graph attention (`"GATE: How to Keep Out Intrusive
    Neighbors" <https://arxiv.org/abs/2406.00418>`_), and GATv2's, on the
    kernel that :func:`~torch_geometric_gate.attention_kernel` selects:

    .. math::
        \mathbf{o}_v = \sum_{(u, v) \in \mathcal{E}} \alpha_{u,v}
        \mathbf{m}_u, \qquad \alpha_{u,v} = \mathrm{softmax}_{u}\left(
        \mathbf{a}_{u,v}^{\top} \phi\left(\mathbf{q}^{src}_u +
        \mathbf{q}^{dst}_v + \mathbf{W}_e \mathbf{e}_{u,v} \right)\right),

    per head, over the incoming edges of every target node :math:`v`, with
    :math:`\phi` the LeakyReLU of :obj:`negative_slope` (the ReLU at
    :obj:`0`), :math:`\mathbf{a}_{u,v}` = :obj:`att_self` on the edges
    flagged :obj:`loop` (GATE's :math:`\mathbf{a}_t`) and :obj:`att_src`
    elsewhere (:math:`\mathbf{a}_s`); with :obj:`att_self=None` every edge
    is scored with :obj:`att_src` (GATv2). Edges flagged :obj:`masked` take
    no part in the softmax; a target node without an unmasked edge gets
    :math:`\mathbf{o}_v = \mathbf{0}`.

    The kernels save no :obj:`[E, H, C]` tensor for backward and run under
    :func:`torch.compile` without a graph break (see
    :func:`~torch_geometric_gate.attention_kernel`); where none applies,
    or under :obj:`attention_kernel('reference')`, this function computes
    the same with PyG's :func:`~torch_geometric.utils.softmax` and
    :func:`~torch_geometric.utils.scatter`.

    Args:
        query_src (torch.Tensor): The source nodes' side of the score,
            :math:`\mathbf{U} \mathbf{x}`, :obj:`[N_src, H, C]`.
        query_dst (torch.Tensor): The target nodes' side,
            :math:`\mathbf{V} \mathbf{x}`, :obj:`[N_dst, H, C]`.
        value (torch.Tensor): The source nodes' messages,
            :math:`\mathbf{W} \mathbf{x}`, :obj:`[N_src, H, C]`.
        edge_index (torch.Tensor or (torch.Tensor, torch.Tensor)): The
            edges, source to target: an :obj:`[2, E]` tensor or
            :class:`torch_geometric.EdgeIndex` (a sorted one gives the
            Triton kernels their CSR without a sort), or a CSR of the
            incoming edges :obj:`(rowptr, src)` (:obj:`rowptr` of
            :obj:`N_dst + 1` entries over the targets).
        att_src (torch.Tensor): :math:`\mathbf{a}_s`, :obj:`[H, C]` or
            :obj:`[1, H, C]`.
        att_self (torch.Tensor, optional): :math:`\mathbf{a}_t`, the same
            shape, or :obj:`None` (GATv2's one vector).
        edge_attr (torch.Tensor, optional): Edge features :obj:`[E, D]`, of
            :obj:`weight_edge`'s dtype.
        weight_edge (torch.Tensor, optional): :math:`\mathbf{W}_e`,
            :obj:`[H * C, D]` (with :obj:`edge_attr`).
        negative_slope (float, optional): :math:`\phi`'s slope,
            non-negative. (default: :obj:`0.0`)
        dropout_p (float, optional): Dropout on the attention weights, as
            :func:`torch.nn.functional.dropout` (pass :obj:`0.0` when not
            training, as for
            :func:`~torch.nn.functional.scaled_dot_product_attention`).
            (default: :obj:`0.0`)
        need_weights (bool, optional): Whether to return the attention
            weights :obj:`[E, H]` (after dropout). (default: :obj:`False`)
        loop (torch.Tensor, optional): :obj:`[E]` booleans, the edges scored
            with :obj:`att_self`; by default the edges whose source equals
            their target, by index, in a bipartite graph too (where
            :class:`~torch_geometric_gate.GATEConv` without
            :obj:`add_self_loops` scores every edge with :obj:`att_src`:
            pass :obj:`loop` of :obj:`False` for its behaviour).
        masked (torch.Tensor, optional): :obj:`[E]` booleans, the edges
            left out of the softmax. (default: none)
        mask_loops_before (int, optional): Leaves out of the softmax, too,
            the self-loops among the first :obj:`mask_loops_before` edges
            (the kernels derive them from the edges: no flag tensor is
            built or saved), as :class:`~torch_geometric_gate.GATEConv`
            masks the input's self-loops before appending its own.
            (default: none)

    Returns:
        The aggregated messages :obj:`[N_dst, H, C]` and the attention
        weights :obj:`[E, H]` (in the order of :obj:`edge_index`), or
        :obj:`None` unless :obj:`need_weights`.

    Example:
        >>> import torch
        >>> from torch_geometric_gate.ops import gate_attention
        >>> q = torch.randn(3, 2, 4)  # 3 nodes, 2 heads of 4 channels
        >>> edge_index = torch.tensor([[0, 1, 2, 0], [1, 2, 0, 0]])
        >>> a_s, a_t = torch.randn(2, 4), torch.randn(2, 4)
        >>> out, alpha = gate_attention(
        ...     q, q, q, edge_index, a_s, a_t, need_weights=True)
        >>> out.shape, alpha.shape
        (torch.Size([3, 2, 4]), torch.Size([4, 2]))
    """
    for name, t in (('query_src', query_src), ('query_dst', query_dst),
                    ('value', value)):  # fmt: skip
        if t.dim() != 3 or t.size(1) == 0 or t.size(2) == 0:
            raise ValueError(
                f"Expected '{name}' of shape [num_nodes, heads, channels] "
                f'with heads, channels > 0 (got {list(t.shape)})'
            )
    if not query_src.shape[1:] == query_dst.shape[1:] == value.shape[1:]:
        raise ValueError(
            "Expected 'query_src', 'query_dst' and 'value' with the same "
            'heads and channels [num_nodes, heads, channels] (got '
            f'{list(query_src.shape)}, {list(query_dst.shape)} and '
            f'{list(value.shape)})'
        )
    src, dst, num_dst, ei = _edges(edge_index, query_src.size(0), query_dst)
    heads, channels = value.shape[1:]
    att_src = _vector(att_src, 'att_src', heads, channels)
    gatv2 = att_self is None
    att_self = att_src if gatv2 else _vector(
        att_self, 'att_self', heads, channels
    )  # fmt: skip
    if query_src.size(0) != value.size(0):
        raise ValueError(
            "Expected 'query_src' and 'value' to have a row per source node "
            f'(got {query_src.size(0)} and {value.size(0)})'
        )
    if not (
        _is_number(negative_slope) and 0 <= negative_slope < float('inf')
    ):  # NaN too
        raise ValueError(
            "Expected a finite non-negative 'negative_slope' (got "
            f'{negative_slope!r})'
        )
    if not (_is_number(dropout_p) and 0.0 <= dropout_p <= 1.0):
        raise ValueError(f"Expected 'dropout_p' in [0, 1] (got {dropout_p!r})")
    if (edge_attr is None) != (weight_edge is None):
        raise ValueError(
            "Expected 'edge_attr' and 'weight_edge' together, or neither"
        )
    num_edges = src.numel()
    for name, t in (('loop', loop), ('masked', masked)):
        if t is not None and (t.dtype != torch.bool or t.shape != src.shape):
            raise ValueError(
                f"Expected '{name}' of booleans of shape [{num_edges}] "
                f'(got {t.dtype} of shape {list(t.shape)})'
            )
    if edge_attr is not None and weight_edge is not None:
        if edge_attr.dim() != 2 or edge_attr.size(0) != num_edges:
            raise ValueError(
                f"Expected 'edge_attr' of shape [{num_edges}, edge_dim] (a "
                f'row per edge), got {list(edge_attr.shape)}'
            )
        expected = [heads * channels, edge_attr.size(1)]
        if list(weight_edge.shape) != expected:
            raise ValueError(
                f"Expected 'weight_edge' of shape {expected} (heads * "
                f'channels, edge_dim), got {list(weight_edge.shape)}'
            )
    floats = dict(
        query_src=query_src, query_dst=query_dst, value=value,
        att_src=att_src, att_self=att_self, edge_attr=edge_attr,
        weight_edge=weight_edge,
    )  # fmt: skip
    for name, t in floats.items():
        if t is not None and not t.is_floating_point():
            raise ValueError(
                f"Expected '{name}' of a floating-point dtype (got {t.dtype})"
            )
    if query_src.dtype != query_dst.dtype:
        # (Summed into one activation: the kernels compute it in
        # 'query_src''s dtype, the reference in the wider one.)
        raise ValueError(
            "Expected 'query_src' and 'query_dst' of the same dtype (got "
            f'{query_src.dtype} and {query_dst.dtype})'
        )
    if edge_attr is not None and weight_edge is not None:
        # (The kernels multiply them: `edge_attr @ weight_edge.t()`.)
        if edge_attr.dtype != weight_edge.dtype:
            raise ValueError(
                "Expected 'edge_attr' and 'weight_edge' of the same dtype "
                f'(got {edge_attr.dtype} and {weight_edge.dtype})'
            )
        # (Summed into the activation too: the kernels score in the dtype
        # of the queries and the vectors, the reference in the wider one.)
        score = torch.promote_types(query_src.dtype, att_src.dtype)
        score = torch.promote_types(score, att_self.dtype)
        if torch.promote_types(score, edge_attr.dtype) != score:
            raise ValueError(
                "Expected 'edge_attr' and 'weight_edge' of a dtype no wider "
                f"than the scores' ({score}, of 'query_src' and the "
                f'attention vectors), got {edge_attr.dtype}'
            )
    if mask_loops_before is not None and (
        isinstance(mask_loops_before, bool)  # (An edge count, not a flag.)
        or not isinstance(mask_loops_before, (int, torch.SymInt))
        or not 0 <= mask_loops_before <= num_edges
    ):
        raise ValueError(
            f"Expected 'mask_loops_before' an int in [0, {num_edges}] (got "
            f'{mask_loops_before!r})'
        )
    device = query_src.device
    for name, t in (*floats.items(), ('edge_index', src),
                    ('edge_index', dst), ('loop', loop),
                    ('masked', masked)):  # fmt: skip
        if t is not None and t.device != device:
            raise ValueError(
                f"Expected '{name}' on the device of 'query_src' ({device}), "
                f'got {t.device}'
            )
    if gatv2:
        loop = torch.zeros_like(src, dtype=torch.bool)
    before = num_edges if mask_loops_before is None else mask_loops_before
    graph = AttentionGraph(
        src=src, dst=dst, loop=loop, masked=masked,
        num_src=query_src.size(0), num_dst=num_dst,
        num_loops=num_edges - before, edge_index=ei,
        mask_input_loops=mask_loops_before is not None,
    )  # fmt: skip
    params = AttentionParams(
        att_neighbor=att_src, att_self=att_self, weight_edge=weight_edge,
        negative_slope=float(negative_slope), dropout=float(dropout_p),
        training=True, need_weights=need_weights,
    )  # fmt: skip
    inputs = AttentionInputs(query_src, query_dst, value, edge_attr)
    result = attend(graph, params, inputs)
    if result is None:
        result = _reference(graph, params, inputs)
    out, alpha = result
    return out, (alpha if need_weights else None)


def _is_number(value) -> bool:
    # A real number (symbolic under torch.compile, a 0-dim tensor too), not
    # a bool or a string:
    if isinstance(value, Tensor):
        return value.dim() == 0 and value.dtype != torch.bool
    return isinstance(
        value, (numbers.Real, torch.SymFloat, torch.SymInt)
    ) and not isinstance(value, bool)


def _vector(att: Tensor, name: str, heads: int, channels: int) -> Tensor:
    if att.dim() == 2:
        att = att.unsqueeze(0)
    if att.shape != (1, heads, channels):
        raise ValueError(
            f"Expected '{name}' of shape [{heads}, {channels}] (heads, "
            f'channels) or [1, {heads}, {channels}] (got {list(att.shape)})'
        )
    return att


def _is_integer(t: Tensor) -> bool:
    return not (
        t.is_floating_point() or t.is_complex() or t.dtype == torch.bool
    )


def _edges(edge_index, num_src: int, query_dst: Tensor):
    r"""The sources, targets, number of targets and the caller's
    :class:`EdgeIndex` (or :obj:`None`) of :obj:`edge_index`, its node
    indices checked on the device (no host sync)."""
    num_dst = query_dst.size(0)
    if isinstance(edge_index, (tuple, list)):
        if len(edge_index) != 2 or not all(
            isinstance(t, Tensor) for t in edge_index
        ):
            raise ValueError(
                "Expected a CSR 'edge_index' as a pair of tensors (rowptr, "
                f'src) (got a {type(edge_index).__name__} of '
                f'{", ".join(type(t).__name__ for t in edge_index)}; a '
                '[2, num_edges] index is one tensor)'
            )
        rowptr, src = edge_index
        if (
            rowptr.dim() != 1
            or rowptr.numel() != num_dst + 1
            or not _is_integer(rowptr)
        ):
            raise ValueError(
                f"Expected a CSR 'rowptr' of {num_dst + 1} integers (the "
                f'target nodes + 1), got {rowptr.dtype} of shape '
                f'{list(rowptr.shape)}'
            )
        if src.dim() != 1 or not _is_integer(src):
            raise ValueError(
                "Expected a CSR 'src' of integers of shape [num_edges] (got "
                f'{src.dtype} of shape {list(src.shape)})'
            )
        assert_rows_in_range(
            src.view(1, -1), (num_src,),
            "The CSR 'src' holds node indices out of range: expected "
            f'0 <= src < {num_src} (the source nodes)',
        )  # fmt: skip
        ends = torch.stack([rowptr[0], rowptr[-1] - src.numel()])
        assert_async(
            (ends == 0).all() & (rowptr.diff() >= 0).all(),
            f"Expected a CSR 'rowptr' that starts at 0, ends at the number "
            f'of edges ({src.numel()}) and never decreases',
        )
        dst = ptr2index(rowptr, output_size=src.numel())
        return src.long(), dst.long(), num_dst, None
    if not isinstance(edge_index, Tensor):
        raise ValueError(
            "Expected 'edge_index' as a [2, num_edges] tensor, an EdgeIndex "
            f'or a CSR (rowptr, src) pair (got {type(edge_index).__name__})'
        )
    if (
        edge_index.dim() != 2
        or edge_index.size(0) != 2
        or not _is_integer(edge_index)
    ):
        raise ValueError(
            "Expected 'edge_index' of integers of shape [2, num_edges] "
            f'(got {edge_index.dtype} of shape {list(edge_index.shape)})'
        )
    ei = edge_index if isinstance(edge_index, EdgeIndex) else None
    if ei is not None and not sparse_size_fits(ei, num_src, num_dst):
        raise ValueError(
            f"Expected an EdgeIndex 'edge_index' of sparse size ({num_src}, "
            f"{num_dst}), the rows of 'query_src' and 'query_dst' (got "
            f'{tuple(ei.sparse_size())})'
        )
    plain = edge_index.as_tensor() if ei is not None else edge_index
    assert_rows_in_range(
        plain, (num_src, num_dst),
        "'edge_index' holds node indices out of range: expected row 0 "
        f'(sources) in [0, {num_src}) and row 1 (targets) in [0, {num_dst})',
    )  # fmt: skip
    return plain[0].long(), plain[1].long(), num_dst, ei


def _reference(
    graph: AttentionGraph, params: AttentionParams, inputs: AttentionInputs
) -> Tuple[Tensor, Tensor]:
    r"""The attention with PyG's softmax and scatter (autograd saves its
    :obj:`[E, H, C]` tensors)."""
    q_src, q_dst, value, edge_attr, _ = inputs
    src, dst = graph.src, graph.dst
    loop, masked = graph.flags()
    z = q_src.index_select(0, src) + q_dst.index_select(0, dst)
    if edge_attr is not None and params.weight_edge is not None:
        z = z + (edge_attr @ params.weight_edge.t()).view_as(z)
    z = torch.nn.functional.leaky_relu(z, params.negative_slope)
    att = torch.where(
        loop.view(-1, 1, 1), params.att_self, params.att_neighbor
    )
    e = (z * att).sum(-1)
    if masked is not None:
        e = e.masked_fill(masked.view(-1, 1), float('-inf'))
    alpha = softmax(e, dst, num_nodes=graph.num_dst)
    if masked is not None:  # A node whose edges are all masked: no NaN.
        alpha = alpha.masked_fill(masked.view(-1, 1), 0.0)
    alpha = torch.nn.functional.dropout(alpha, params.dropout, training=True)
    msg = value.index_select(0, src) * alpha.unsqueeze(-1)
    out = scatter(msg, dst, 0, dim_size=graph.num_dst, reduce='sum')
    return out, alpha
