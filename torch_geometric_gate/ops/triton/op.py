r"""The Triton kernels: GATE's attention fused per target node.

:obj:`'auto'` runs them on CUDA tensors from
:attr:`~torch_geometric_gate.ops.KernelSettings.triton_min_edges` edges.
Their CUDA tests and the at-scale parity check ran on an NVIDIA H100 at
commit d0fad94 (``benchmark/results/h100-tests.md``, ``h100-parity.md``);
the kernels changed since were tested under the interpreter. On CPU
they run under the Triton interpreter (:obj:`TRITON_INTERPRET=1`, slow, for
tests only).

The design follows the Triton graph-transformer kernel of
`anemoi-core <https://github.com/ecmwf/anemoi-core>`_ (FlashAttention over a
CSR of incoming edges), with GATE's score:

* **Forward** (:func:`gate_fwd_kernel`): one program per segment of at most
  :data:`~torch_geometric_gate.ops.triton._launch.SEGMENT_EDGES` incoming
  edges of a target node :math:`v` (a node
  of low in-degree is one segment; a hub is split across programs), walked
  in blocks of :obj:`BLOCK_E` edges: it scores them (:math:`\mathbf{a}_t`
  on self-loops, :math:`\mathbf{a}_s` elsewhere, masked edges excluded),
  keeps an online softmax (running max and sum) and accumulates
  :math:`\sum_u \alpha_{uv} \mathbf{W} \mathbf{x}_u` in float32; the
  segments of a hub are merged by :func:`gate_combine_kernel` in a fixed
  order (deterministic, no atomics). It saves only the :obj:`[N, H]`
  float32 log-sum-exp: no :obj:`[E, H, C]` or :obj:`[E, H]` tensor is kept
  for backward, and no output in a low precision (the backward's
  :math:`\delta_v` is recomputed from the scores in float32, so a sharp
  softmax under bfloat16 keeps exact gradients). Only when the caller asks
  for the attention weights (:obj:`AttentionParams.need_weights`) does a
  second, edge-parallel kernel write :math:`\exp(e_{uv} - \mathrm{lse}_v)`
  straight into the caller's edge order; where it reads only the appended
  self-loops' (:obj:`AttentionParams.loop_weights_only`, as
  :meth:`GATEConv.forward_with_self_attention
  <torch_geometric_gate.nn.conv.GATEConv.forward_with_self_attention>`
  asks), a node-parallel kernel (:func:`gate_loop_alpha_kernel`) writes
  those alone, :obj:`N x H` instead of :obj:`E x H`.
* **Backward** in two deterministic passes (no atomics): per segment of
  a target node's edges, as the forward splits them, the split nodes
  finished by :func:`gate_bwd_combine_kernel` (gradients of
  :math:`\mathbf{V} \mathbf{x}_v`, of the attention vectors,
  and :math:`\delta_v = \sum_u \alpha_{uv} \, d\alpha_{uv}`), then per
  source node over a reverse CSR (gradients of :math:`\mathbf{U}
  \mathbf{x}_u`, :math:`\mathbf{W} \mathbf{x}_u` and of the edge
  projection). Scores and weights are recomputed from the saved
  log-sum-exp. Pass 2 splits a source node's outgoing edges into
  segments likewise (:func:`gate_bwd_src_combine_kernel`). On an H100
  two identical forwards' attention weights differed by up to 7.2e-7 of the
  largest in float32: runs repeat up to rounding, not bit for bit
  (``benchmark/parity.py`` records where a difference starts); under the
  interpreter they repeat bit for bit.
* **Edge features**: the projection :math:`\mathbf{W}_e \mathbf{e}_{uv}`
  is one :obj:`[E, H * C]` GEMM in PyTorch, computed in CSR order, read by
  the kernels, freed after the forward and recomputed in backward; its
  gradient, written per edge by pass 2, goes back through two GEMMs.
* **Dropout** on the attention weights: a Philox seed drawn per call by
  the generator of the inputs' device (a :obj:`[1]` tensor there, which the
  kernels read; :func:`torch.manual_seed` reproduces it), the mask of edge
  :obj:`p` (CSR position), head :obj:`h` is
  :obj:`tl.rand(seed, p * H + h) >= p`, the same in forward and backward.
  The kept weights are scaled by :math:`1 / (1 - p)` as
  :func:`torch.nn.functional.dropout` does.
* **Dtypes**: float32, bfloat16 and float16 inputs; every sum in float32.
  The outputs take the dtypes of the chunked kernels'. float64 is refused
  (the kernels compute in float32; the chunked kernels and the reference
  compute in float64).
* **The CSR** is built at every call, never cached: from a sorted
  :class:`torch_geometric.EdgeIndex` (:obj:`AttentionGraph.edge_index`),
  its own cached CSC (and, for the backward, CSR), computed once per
  :obj:`EdgeIndex` by PyG and shared by every layer and call, plus the
  appended self-loops merged in without a sort (one launch each,
  :func:`gate_merge_csr_kernel` and :func:`gate_merge_rev_kernel`); from
  plain tensors, one row-wise stable :func:`torch.sort` per call of the
  :obj:`[2, E]` edge index, which gives the forward's CSR and the
  backward's reverse CSR (finished by :func:`gate_csr_kernel`, which also
  finds both row pointers, and :func:`gate_rev_pos_kernel`). Either way
  the eager backward sorts nothing (under :func:`torch.compile` the
  backward operator sorts the sources once to rebuild the reverse CSR,
  and the forward reads no :obj:`EdgeIndex` cache), and the kernels that
  finish the CSR also
  write every edge's kind. The work lists of split nodes are computed
  once too (a single :obj:`arange` below :data:`SEGMENT_EDGES` edges).
  Neither syncs with the device (but an :obj:`EdgeIndex` without a sparse
  size infers it once).
* **Double backward** (:obj:`create_graph=True`): the backward recomputes
  the attention with the chunked kernels
  (:mod:`torch_geometric_gate.ops.chunked`) under autograd, in CSR order,
  with the same dropout mask, and differentiates that, so gradient
  penalties work (at the chunked kernels' speed); it needs no tensor
  beyond those the first-order backward saves.
* **Options** of the switch (:class:`~torch_geometric_gate.ops.
  KernelSettings`, set with :func:`~torch_geometric_gate.ops.
  attention_kernel`): the tiles from which the edge blocks follow
  (:obj:`triton_forward_tile`, :obj:`triton_backward_tile`), the one-head
  layout of the forward (:obj:`triton_one_head_layout`,
  :obj:`triton_one_head_nodes`), the backward's per-edge record
  (:obj:`triton_backward_record`) and the warps (:obj:`triton_warps`);
  every choice gives the same outputs up to rounding (the block changes
  the order of the softmax's sums). They are read at the forward and
  kept for its backward (and passed to the custom operators below).
* Launches run under the tensors' CUDA device
  (:class:`torch.cuda.device`), not the current one.
* **Under** :func:`torch.compile` the forward and the backward are the
  custom operators ``torch_geometric_gate::triton_attention`` and
  ``::triton_attention_backward`` (opaque to the compiler; the CSR is built
  in the traced graph from plain tensors, the dropout seed drawn inside the
  forward operator). Their backward is not differentiable: no double
  backward under compile. They read and return no CPU tensor and make no
  host read, as capture by CUDA graphs (:obj:`mode='reduce-overhead'`)
  requires; with dropout too: the seed is drawn on the device, inside the
  graph, so that each replay draws its own.

A target node without unmasked incoming edges gets :obj:`out = 0` (the
reference's softmax would give NaN for a node whose edges are all masked).
"""

from typing import List, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.index import ptr2index

from torch_geometric_gate.ops.switch import KernelSettings
from torch_geometric_gate.ops.triton._csr import (
    csr_and_reverse,
    csr_dst,
    edge_kinds,
    forward_csr,
)
from torch_geometric_gate.ops.triton._launch import (
    _draw_seed,
    _dtypes,
    _forward,
    _keep_mask,
    _Settings,
)
from torch_geometric_gate.ops.triton._launch_backward import _backward
from torch_geometric_gate.ops.types import (
    TRITON_DTYPES,
    AttentionGraph,
    AttentionInputs,
    AttentionParams,
    projection_product,
)


class TritonAttention(torch.autograd.Function):
    r"""The autograd function of :func:`triton_attention`; returns
    :obj:`(alpha [E, H] or None, out [N_dst, H, C])`. Where the projections
    are the views of one product (:attr:`AttentionInputs.product`), it
    takes that
    product in the place of :obj:`q_src` (:obj:`None` for :obj:`q_dst` and
    :obj:`value`; the parts in :obj:`settings.parts`) and returns its
    gradient, written in place by the kernels: autograd stacks no three
    gradients into a copy of it."""

    @staticmethod
    def forward(
        ctx, q_src, q_dst, value, edge_attr, weight_edge, att_neighbor,
        att_self, perm, src_s, rowptr, settings,
    ):  # fmt: skip
        if settings.fused:
            q_src, q_dst, value = settings.parts
            settings.parts = None
        alpha, out, lse = _forward(
            q_src, q_dst, value, edge_attr, weight_edge, att_neighbor,
            att_self, perm, src_s, rowptr, settings,
        )  # fmt: skip
        ctx.save_for_backward(
            q_src, q_dst, value, edge_attr, weight_edge, att_neighbor,
            att_self, perm, src_s, rowptr, settings.kind, lse,
        )  # fmt: skip
        ctx.settings = settings
        ctx.set_materialize_grads(False)
        return alpha, out

    @staticmethod
    def backward(ctx, grad_alpha, grad_out):
        saved = ctx.saved_tensors
        settings = ctx.settings
        if grad_alpha is not None and settings.loop_weights:
            # The appended loops' rows of all E weights' gradient (zero
            # elsewhere), as the backward reads it:
            perm = saved[7]  # (one entry per edge)
            num_others = perm.numel() - grad_alpha.size(0)
            zeros = grad_alpha.new_zeros(num_others, grad_alpha.size(1))
            grad_alpha = torch.cat([zeros, grad_alpha])
        if torch.is_grad_enabled():
            return (*_double_backward(saved, settings, grad_alpha, grad_out),)
        need = ctx.needs_input_grad
        if settings.fused:  # The product's, for all three:
            need = (need[0],) * 3 + need[3:]
        grads = _backward(
            saved, settings, grad_alpha, grad_out, need, views=settings.views
        )
        return (*grads, None, None, None, None)


def _double_backward(saved, settings, grad_alpha, grad_out):
    r"""Recomputes the attention with the chunked kernels under autograd, in
    CSR order (the same dropout mask), from the tensors the first-order
    backward saves, and differentiates it with :obj:`create_graph=True`."""
    from torch_geometric.utils import softmax

    from torch_geometric_gate.ops.chunked.steps import (
        EdgeAggregate,
        EdgeScore,
    )

    *inputs, perm, src_s, rowptr, kind, _ = saved
    # Each input through a view of its own: one tensor in several roles (a
    # GATv2 call's att_self = att_neighbor, shared weights' q_src = value)
    # gets each role's gradient, not the sum of all its roles' in each.
    inputs = [
        t.view_as(t) if t is not None and t.requires_grad else t
        for t in inputs
    ]
    (
        q_src, q_dst, value, edge_attr, weight_edge, att_neighbor, att_self,
    ) = inputs  # fmt: skip
    num_edges = perm.numel()
    src = src_s.long()
    dst = ptr2index(rowptr.long(), output_size=num_edges)
    loop = (kind & 1) == 1
    attr = None if edge_attr is None else edge_attr.index_select(0, perm)
    chunk = settings.chunk  # The switch's, in force at the forward.
    e = EdgeScore.apply(
        q_src, q_dst, attr, weight_edge, src, dst, loop,
        att_neighbor, att_self, settings.slope, chunk,
    )  # fmt: skip
    masked = (kind >= 2).view(-1, 1)
    e = e.masked_fill(masked, float('-inf'))
    # A node whose every edge is masked: no NaN (as the kernels give).
    alpha = softmax(e, dst, num_nodes=settings.num_dst).masked_fill(masked, 0)
    if settings.p_drop > 0:
        keep = _keep_mask(settings, num_edges, alpha.size(1), alpha.device)
        alpha = alpha * keep.to(alpha.dtype) * settings.scale
    out = EdgeAggregate.apply(value, alpha, src, dst, settings.num_dst, chunk)
    outputs, grads = [], []
    if grad_alpha is not None and alpha.requires_grad:
        outputs.append(alpha)
        grads.append(grad_alpha.index_select(0, perm))
    if grad_out is not None and out.requires_grad:
        outputs.append(out)
        grads.append(grad_out)
    wanted = [t for t in inputs if t is not None and t.requires_grad]
    result = iter(
        torch.autograd.grad(
            outputs, wanted, grads, create_graph=True, allow_unused=True
        )
        if outputs and wanted
        else [None] * len(wanted)
    )
    grads_in = [
        next(result) if t is not None and t.requires_grad else None
        for t in inputs
    ]
    if settings.fused:  # The product's, as value, U, V:
        parts = [
            torch.zeros_like(t) if g is None else g
            for g, t in zip(grads_in[:3], inputs[:3])
        ]
        fused = torch.stack([parts[2], parts[0], parts[1]], 1)
        grads_in[:3] = [fused.flatten(1), None, None]  # (0 rows: no -1)
    return (*grads_in, None, None, None, None)


def _check_dtypes(params: AttentionParams, q_src, q_dst, value, edge_attr):
    named = dict(
        q_src=q_src, q_dst=q_dst, value=value,
        att_neighbor=params.att_neighbor, att_self=params.att_self,
        weight_edge=params.weight_edge,
    )  # fmt: skip
    for name, t in named.items():
        if t is not None and t.dtype not in TRITON_DTYPES:
            raise TypeError(
                f'The Triton kernels compute in float32 and take float32, '
                f"bfloat16 or float16 tensors, got '{name}' of dtype "
                f"{t.dtype}; run float64 with attention_kernel('chunked') "
                f"or 'reference'"
            )
    weight = params.weight_edge
    if edge_attr is not None and weight is not None:
        if edge_attr.dtype != weight.dtype:
            # The rule of the reference and chunked kernels, which multiply
            # the two (`edge_attr @ weight_edge.t()`):
            raise RuntimeError(
                f"expected 'edge_attr' and the edge projection's weight to "
                f'have the same dtype, but got: {edge_attr.dtype} != '
                f'{weight.dtype}'
            )


def triton_attention(
    graph: AttentionGraph,
    params: AttentionParams,
    inputs: AttentionInputs,
    settings: KernelSettings,
) -> Tuple[Tensor, Optional[Tensor]]:
    r"""GATE's attention with the Triton kernels: returns the aggregated
    values :obj:`[N_dst, H, C]` and the attention weights :obj:`[E, H]` (in
    the order of :obj:`graph.src`; :obj:`None`, and not computed, unless
    :obj:`params.need_weights`; with :obj:`params.loop_weights_only`, those
    of the :obj:`graph.num_loops` appended self-loops alone,
    :obj:`[num_loops, H]`, except under :func:`torch.compile`).

    Args:
        graph (AttentionGraph): The edges, self-loops appended. With a
            sorted :class:`torch_geometric.EdgeIndex` in
            :obj:`graph.edge_index` (whose edges are the first of
            :obj:`graph.src`/:obj:`graph.dst`, source to target), the CSR
            comes from its cached CSC without a sort; else one row-wise
            stable sort of :obj:`graph.src` and :obj:`graph.dst` stacked
            builds it and the backward's reverse CSR per call.
        params (AttentionParams): The attention parameters.
        inputs (AttentionInputs): The projections; edge features of
            :obj:`params.weight_edge`'s dtype.
        settings (KernelSettings): The switch's settings in force.
    """
    q_src, q_dst, value, edge_attr, product = inputs
    if params.negative_slope < 0:
        raise ValueError('The Triton kernels need negative_slope >= 0')
    _check_dtypes(params, q_src, q_dst, value, edge_attr)
    heads = value.size(1)
    compiling = torch.compiler.is_compiling()
    if compiling:  # The CSR from plain tensors, in the traced graph.
        graph = graph._replace(edge_index=None)
    reverse = None
    backward = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad
        for t in (
            q_src, q_dst, value, edge_attr, params.weight_edge,
            params.att_neighbor, params.att_self,
        )
    )  # fmt: skip
    if compiling or not backward:
        csr = forward_csr(graph)
    else:
        # The backward's reverse CSR with the forward's CSR:
        csr, reverse = csr_and_reverse(graph)
        # The targets in CSR order, once for the forward and the backward:
        csr = csr._replace(dst=csr_dst(csr))
    kind = edge_kinds(graph, csr)
    p_drop = float(params.dropout) if params.training else 0.0
    if p_drop > 0 and graph.src.numel() * heads >= 2**31:
        raise RuntimeError('Dropout needs E * heads < 2**31')
    if compiling:
        alpha, out, _, _ = torch.ops.torch_geometric_gate.triton_attention(
            q_src, q_dst, value, edge_attr, params.weight_edge,
            params.att_neighbor, params.att_self, csr.perm, csr.src,
            csr.rowptr, kind, graph.num_dst, float(params.negative_slope),
            p_drop, params.need_weights, _option_list(settings),
        )  # fmt: skip
        return out, (alpha if params.need_weights else None)
    # The appended loops' weights alone (`graph.num_loops` rows, the loop of
    # node v the last edge of v's CSR segment in either CSR build), in the
    # place of all E x H:
    loops_only = params.need_weights and params.loop_weights_only
    launch = _Settings(
        q_src, value, params.att_neighbor, params.att_self, kind,
        graph.num_dst, params.negative_slope, p_drop,
        _draw_seed(q_src.device) if p_drop > 0 else None,
        params.need_weights and not loops_only, graph.num_loops, settings,
    )  # fmt: skip
    launch.loop_weights = loops_only
    launch.reverse, launch.dst = reverse, csr.dst
    # The chunks of the double backward (`_double_backward`):
    launch.chunk = settings.chunk_size(value.device)
    projections = (q_src, q_dst, value)
    if product is not None and product is not projection_product(
        q_src, q_dst, value
    ):
        raise ValueError(
            "'AttentionInputs.product' must be the [N, 3 * H * C] tensor "
            "whose views 'value', 'q_src' and 'q_dst' are, in this order "
            '(see projection_product), or None'
        )
    if (
        product is not None
        and not product.requires_grad
        and any(t.requires_grad for t in (q_src, q_dst, value))
    ):
        raise ValueError(
            "'AttentionInputs.product' must require grad where its views "
            "'value', 'q_src' and 'q_dst' do: their gradients are the "
            "product's (leave 'product' None to differentiate the views)"
        )
    launch.fused = product is not None and backward
    if launch.fused:
        launch.parts, projections = projections, (product, None, None)
    # A leaf's gradient becomes its .grad: a copy, not a view that keeps
    # the backward's whole buffer alive until the next zero_grad; so does
    # that of a view of a leaf (`weight.view(N, H, C)`: the view's backward
    # hands the leaf a view of what it gets).
    launch.views = not any(
        t is not None
        and t.requires_grad
        and (t.is_leaf or (t._base is not None and t._base.is_leaf))
        for t in projections
    )
    alpha, out = TritonAttention.apply(
        *projections, edge_attr, params.weight_edge, params.att_neighbor,
        params.att_self, csr.perm, csr.src, csr.rowptr, launch,
    )  # fmt: skip
    return out, alpha


# The compiled form: the forward and the backward as custom operators -------
# (opaque to torch.compile, as the chunked kernels' are; no double backward)

_NUM_DIFFERENTIABLE = 7


def _option_list(settings: KernelSettings) -> List[int]:
    r"""The Triton options of :obj:`settings` as the custom operators take
    them (:func:`_options` reads them back)."""
    return [
        settings.triton_forward_tile, settings.triton_backward_tile,
        int(settings.triton_one_head_layout), settings.triton_one_head_nodes,
        int(settings.triton_backward_record), settings.triton_warps or 0,
    ]  # fmt: skip


def _options(option_list: List[int]) -> KernelSettings:
    forward, backward, one_head, nodes, record, warps = option_list
    return KernelSettings(
        triton_forward_tile=forward, triton_backward_tile=backward,
        triton_one_head_layout=bool(one_head), triton_one_head_nodes=nodes,
        triton_backward_record=bool(record), triton_warps=warps or None,
    )  # fmt: skip


@torch.library.custom_op(
    'torch_geometric_gate::triton_attention', mutates_args=()
)
def _attention_op(
    q_src: Tensor,
    q_dst: Tensor,
    value: Tensor,
    edge_attr: Optional[Tensor],
    weight_edge: Optional[Tensor],
    att_neighbor: Tensor,
    att_self: Tensor,
    perm: Tensor,
    src_s: Tensor,
    rowptr: Tensor,
    kind: Tensor,
    num_dst: int,
    slope: float,
    p_drop: float,
    need_weights: bool,
    options: List[int],
) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""The weights (empty unless :obj:`need_weights`), the output, the
    log-sum-exp and the dropout seed :obj:`[1]` (drawn here)."""
    seed = _draw_seed(q_src.device) if p_drop > 0 else None
    settings = _Settings(
        q_src, value, att_neighbor, att_self, kind, num_dst, slope, p_drop,
        seed, need_weights, options=_options(options),
    )  # fmt: skip
    alpha, out, lse = _forward(
        q_src, q_dst, value, edge_attr, weight_edge, att_neighbor, att_self,
        perm, src_s, rowptr, settings,
    )  # fmt: skip
    if alpha is None:
        alpha = q_src.new_empty(0, value.size(1), dtype=settings.score_dtype)
    if lse._base is not None:  # A part of the forward's buffer: an output
        lse = lse.clone()  # of its own.
    # The seed, on the inputs' device (without dropout a placeholder that
    # nothing reads): an operator with a CPU output would be left out of a
    # CUDA graph.
    if seed is None:
        seed = q_src.new_zeros(1, dtype=torch.int64)
    return alpha, out, lse, seed


@_attention_op.register_fake
def _(
    q_src, q_dst, value, edge_attr, weight_edge, att_neighbor, att_self,
    perm, src_s, rowptr, kind, num_dst, slope, p_drop, need_weights,
    options,
):  # fmt: skip
    score_dtype, out_dtype = _dtypes(q_src, value, att_neighbor, att_self)
    heads, channels = value.shape[1], value.shape[2]
    alpha = q_src.new_empty(
        perm.size(0) if need_weights else 0, heads, dtype=score_dtype
    )
    out = value.new_empty(num_dst, heads, channels, dtype=out_dtype)
    lse = value.new_empty(num_dst, heads, dtype=torch.float32)
    return alpha, out, lse, q_src.new_empty(1, dtype=torch.int64)


@torch.library.custom_op(
    'torch_geometric_gate::triton_attention_backward', mutates_args=()
)
def _attention_backward_op(
    grad_alpha: Optional[Tensor],
    grad_out: Optional[Tensor],
    q_src: Tensor,
    q_dst: Tensor,
    value: Tensor,
    edge_attr: Optional[Tensor],
    weight_edge: Optional[Tensor],
    att_neighbor: Tensor,
    att_self: Tensor,
    perm: Tensor,
    src_s: Tensor,
    rowptr: Tensor,
    kind: Tensor,
    lse: Tensor,
    seed: Tensor,
    num_dst: int,
    slope: float,
    p_drop: float,
    options: List[int],
    need: List[bool],
) -> List[Tensor]:
    r"""The gradients that :obj:`need` asks for, in the order of
    :func:`_backward`'s."""
    settings = _Settings(
        q_src, value, att_neighbor, att_self, kind, num_dst, slope, p_drop,
        seed if p_drop > 0 else None, False,
        options=_options(options),
    )  # fmt: skip
    saved = (
        q_src, q_dst, value, edge_attr, weight_edge, att_neighbor, att_self,
        perm, src_s, rowptr, kind, lse,
    )  # fmt: skip
    grads = _backward(saved, settings, grad_alpha, grad_out, need)
    # Contiguous, as the fake implementation declares them:
    return [g.contiguous() for g in grads if g is not None]


@_attention_backward_op.register_fake
def _(grad_alpha, grad_out, *args):
    inputs, need = args[:_NUM_DIFFERENTIABLE], args[-1]
    # Contiguous, as the kernels return them, whatever the inputs' strides
    # (`empty_like` keeps a permuted input's):
    return [
        t.new_empty(t.shape)
        for t, n in zip(inputs, need)
        if n and t is not None
    ]


def _setup_context(ctx, inputs, output):
    (
        q_src, q_dst, value, edge_attr, weight_edge, att_neighbor, att_self,
        perm, src_s, rowptr, kind, num_dst, slope, p_drop, _, options,
    ) = inputs  # fmt: skip
    _, _, lse, seed = output
    ctx.mark_non_differentiable(lse, seed)
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(
        q_src, q_dst, value, edge_attr, weight_edge, att_neighbor, att_self,
        perm, src_s, rowptr, kind, lse, seed,
    )  # fmt: skip
    ctx.settings = (num_dst, slope, p_drop, options)


def _op_backward(ctx, grad_alpha, grad_out, _grad_lse, _grad_seed):
    saved = ctx.saved_tensors
    need = [
        bool(n) and t is not None
        for n, t in zip(ctx.needs_input_grad, saved[:_NUM_DIFFERENTIABLE])
    ]
    if grad_alpha is not None and grad_alpha.numel() == 0:
        grad_alpha = None
    grads = iter(
        torch.ops.torch_geometric_gate.triton_attention_backward(
            grad_alpha, grad_out, *saved, *ctx.settings, need
        )
    )
    return tuple(next(grads) if n else None for n in need) + (None,) * 9


_attention_op.register_autograd(_op_backward, setup_context=_setup_context)


__all__ = ['triton_attention']
