r"""The chunked kernels: GATE's attention without any :obj:`[E, H, C]`
tensor saved for backward.

Autograd saves the :obj:`[E, H, C]` edge tensors of the reference path (the
gathered projections, the activation :math:`\phi(\mathbf{U} \mathbf{x}_u +
\mathbf{V} \mathbf{x}_v)`, the gathered messages) for backward. The kernels
below save only node tensors, the edge index (as :obj:`int32` where the
node count allows), the :obj:`[E]` self-loop flags (none under the
layer's :obj:`add_self_loops`: they are derived from the edges again, see
:func:`~torch_geometric_gate.ops.types.edge_flags`), the :obj:`[E, H]`
attention weights and, with dropout, the softmax before dropout and a seed
(the dropout mask is drawn again from it in backward), and recompute every
:obj:`[E, H, C]` tensor in backward, chunk by chunk over the edges, so that
none is ever held whole. Messages are summed in float32 (or wider) whatever
the dtype of the projections.

:func:`chunked_attention` runs the whole attention (scores, masking,
softmax, dropout, aggregation) as one autograd node, in two forms that
share every computation:

* eagerly, a :class:`torch.autograd.Function` whose backward is itself made
  of differentiable ATen operations (double backward, gradient penalties,
  :func:`torch.func.grad`); on CPU tensors it runs the loops that Inductor
  compiles from the same computation (:mod:`~torch_geometric_gate.ops.fused`)
  where they apply, forward and first-order backward;
* under :func:`torch.compile`, the :mod:`torch.library` custom operator
  ``torch_geometric_gate::chunked_attention`` (with a fake implementation
  and autograd), whose backward is the custom operator
  ``torch_geometric_gate::chunked_attention_backward``: the compiler
  traces both as single opaque nodes (no graph break, no chunk loop
  unrolled into the graph). On CPU tensors the operators run the same
  computation compiled by Inductor (:mod:`~torch_geometric_gate.ops.fused`):
  fused loops instead of chunks of ATen operations, the same saved
  tensors. A custom operator's backward cannot be differentiated again (nor
  can :func:`torch.compile`'s backward).
"""

from typing import List, Optional, Tuple

import torch
from torch import Tensor

from torch_geometric_gate.ops.chunked.steps import (
    _aggregate,
    _aggregate_backward,
    _score_backward,
    _scores,
)
from torch_geometric_gate.ops.types import (
    AttentionGraph,
    AttentionParams,
    edge_flags,
)

# The fused attention ------------------------------------------------------


def _index_dtype(num_src: int, num_dst: int) -> torch.dtype:
    # The narrowest index that `index_select` and `index_add_` take:
    return torch.int32 if max(num_src, num_dst) < 2**31 else torch.int64


# The dispatch keys of vmap's mode: `torch.autograd.grad(...,
# is_grads_batched=True)` and `jacobian(..., vectorize=True)` enter the
# first, `torch.func.vmap` the second.
_VMAP_MODES = torch._C.DispatchKeySet(
    torch._C._parse_dispatch_key('VmapMode')
).add(torch._C.DispatchKey.FuncTorchVmapMode)


def _dropout_noise(
    seed: Tensor, shape: List[int], p: float, like: Tensor
) -> Tensor:
    r"""The dropout multiplier drawn from :obj:`seed`: :obj:`0` with
    probability :obj:`p`, else :obj:`1 / (1 - p)`, as
    :func:`torch.nn.functional.dropout` scales."""
    gen = torch.Generator(device=like.device).manual_seed(int(seed.item()))
    # In backward under vmap (batched gradients) random operations are
    # refused; this one draws the same mask for the whole batch (the
    # forward's), on plain tensors, so it runs outside vmap's mode:
    with torch._C._ExcludeDispatchKeyGuard(_VMAP_MODES):
        noise = like.new_empty(shape).bernoulli_(1.0 - p, generator=gen)
    return noise.mul_(1.0 / (1.0 - p) if p < 1.0 else 0.0)


def _forward(
    q_src: Tensor,
    q_dst: Tensor,
    value: Tensor,
    edge_attr: Optional[Tensor],
    weight_edge: Optional[Tensor],
    att_neighbor: Tensor,
    att_self: Tensor,
    src: Tensor,
    dst: Tensor,
    loop: Optional[Tensor],
    masked: Optional[Tensor],
    loops_masked_before: int,
    num_dst: int,
    negative_slope: float,
    dropout: float,
) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    r"""Returns the attention weights :obj:`[E, H]` (after dropout), the
    aggregated values :obj:`[N_dst, H, C]`, and what backward needs: the
    softmax before dropout (:obj:`[E, H]`, empty without dropout), the edge
    index :obj:`[2, E]` (:obj:`int32` where the node count allows) and the
    dropout seed (:obj:`[1]`, empty without dropout). The flags are those
    of :func:`edge_flags`."""
    att = torch.cat([att_neighbor, att_self], dim=0)  # [2, H, C]
    src, dst = src.long(), dst.long()
    loop, masked = edge_flags(
        src, dst, loop, masked, loops_masked_before or None
    )
    e = _scores(
        q_src, q_dst, edge_attr, weight_edge, src, dst, loop, att,
        negative_slope,
    )  # fmt: skip
    # Half-precision scores are normalized and summed in float32 (a sum
    # over a hub's edges in float16 drifts: issue 50.3):
    dtype = e.dtype
    e = e.to(_accumulation_dtype(dtype))
    if masked is not None:
        e.masked_fill_(masked.view(-1, 1), float('-inf'))
    # PyG's softmax (`torch_geometric.utils.softmax`), in place:
    heads = e.size(1)
    index = dst.view(-1, 1).expand_as(e)
    # -inf where a node has no edge (never read): no pass to exclude it.
    e_max = e.new_full((num_dst, heads), float('-inf'))
    e_max.scatter_reduce_(0, index, e, 'amax')
    alpha = e.sub_(e_max.index_select(0, dst)).exp_()
    total = e.new_zeros(num_dst, heads).index_add_(0, dst, alpha).add_(1e-16)
    alpha.div_(total.index_select(0, dst))
    softmax = alpha.new_empty(0, heads)
    seed = _draw_seed(dropout)
    if dropout > 0.0:
        softmax = alpha
        # Drawn in the weights' dtype, as backward draws it again:
        like = alpha.new_empty(0, dtype=dtype)
        alpha = alpha * _dropout_noise(seed, list(alpha.shape), dropout, like)
    out_dtype = torch.promote_types(value.dtype, dtype)
    out = _aggregate(value, alpha, src, dst, num_dst).to(out_dtype)
    edges = torch.stack([src, dst]).to(_index_dtype(q_src.size(0), num_dst))
    return alpha.to(dtype), out, softmax.to(dtype), edges, seed


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    r"""The dtype that sums of :obj:`dtype` values accumulate in: float32
    for half precision, else :obj:`dtype`."""
    return torch.promote_types(dtype, torch.float32)


def _draw_seed(dropout: float) -> Tensor:
    r"""The dropout seed :obj:`[1]` (empty without dropout), drawn from
    PyTorch's CPU generator so that :func:`torch.manual_seed` reproduces
    the mask, which backward draws again from it (it is never saved)."""
    if dropout > 0.0:
        return torch.randint(2**62, (1,), dtype=torch.int64)
    return torch.empty(0, dtype=torch.int64)


def _needed_grads(grads: List[Optional[Tensor]], need: List[bool]):
    r"""From the gradients of :obj:`q_src, q_dst, value, edge_attr,
    weight_edge` and of :obj:`[a_s; a_t]` (:obj:`[2, H, C]`), those that
    :obj:`need` asks for (of the backward's seven inputs), in order, as the
    custom operator returns them."""
    grad_att = grads[5]
    grads = (
        list(grads[:5])
        + [  # Halves of one tensor: cloned.
            grad_att[:1].clone() if need[5] and grad_att is not None else None,
            grad_att[1:].clone() if need[6] and grad_att is not None else None,
        ]
    )
    return [g for g, n in zip(grads, need) if n and g is not None]


def _backward(
    grad_alpha: Optional[Tensor],
    grad_out: Optional[Tensor],
    grad_softmax: Optional[Tensor],
    q_src: Tensor,
    q_dst: Tensor,
    value: Tensor,
    edge_attr: Optional[Tensor],
    weight_edge: Optional[Tensor],
    att_neighbor: Tensor,
    att_self: Tensor,
    loop: Optional[Tensor],
    alpha: Tensor,
    softmax: Tensor,
    edges: Tensor,
    seed: Tensor,
    num_dst: int,
    negative_slope: float,
    dropout: float,
    need: List[bool],
) -> List[Tensor]:
    r"""The gradients of :func:`_forward`'s inputs :obj:`q_src, q_dst,
    value, edge_attr, weight_edge, att_neighbor, att_self` where
    :obj:`need` asks for them (and the input is not :obj:`None`), in that
    order, from those of its outputs :obj:`alpha`, :obj:`out` and
    :obj:`softmax`; made of differentiable operations only (double
    backward). As a custom operator wants: no :obj:`None`, and no view of
    an input or of another output."""
    # Saved as int32 where it fits, indexed as int64: on the CPU,
    # `index_select` and `index_add_` with an int32 index are several times
    # slower (a transient copy of 16 bytes per edge).
    src, dst = edges[0].long(), edges[1].long()
    if loop is None:  # See `edge_flags`.
        loop = src == dst
    need_score = any(need[:2]) or any(need[3:])
    grad_value, g = None, None
    if grad_out is not None:
        grad_value, g = _aggregate_backward(
            grad_out, value, alpha, src, dst, need[2], need_score
        )
    if grad_value is None and need[2]:  # `out` took no part in the loss.
        grad_value = torch.zeros_like(value)
    if not need_score:
        return [grad_value] if need[2] else []
    # The gradient of the attention weights after dropout, then before:
    if grad_alpha is not None:
        g = grad_alpha if g is None else g + grad_alpha
    if g is None:
        g = torch.zeros_like(alpha)
    if dropout > 0.0:
        g = g * _dropout_noise(seed, list(alpha.shape), dropout, alpha)
        alpha = softmax
    if grad_softmax is not None and grad_softmax.numel() > 0:
        g = g + grad_softmax
    # The softmax's backward: alpha * (g - sum over the incoming edges),
    # summed in float32 for half precision:
    dtype = alpha.dtype
    acc = _accumulation_dtype(dtype)
    alpha, g = alpha.to(acc), g.to(acc)
    g = alpha * g
    total = g.new_zeros(num_dst, g.size(1)).index_add(0, dst, g)
    grad_e = (g - alpha * total.index_select(0, dst)).to(dtype)
    att = torch.cat([att_neighbor, att_self], dim=0)
    need_score = [need[0], need[1], need[3], need[4], need[5] or need[6]]
    grad_src, grad_dst, grad_attr, grad_weight, grad_att = _score_backward(
        grad_e, q_src, q_dst, edge_attr, weight_edge, src, dst, loop, att,
        negative_slope, need_score,
    )  # fmt: skip
    grads = [grad_src, grad_dst, grad_value, grad_attr, grad_weight, grad_att]
    return _needed_grads(grads, need)


# The inputs of `_forward` (and of the custom operator), by position:
_NUM_INPUTS = 15
_NUM_DIFFERENTIABLE = 7  # q_src ... att_self


def _setup_context(ctx, inputs, output):
    (
        q_src, q_dst, value, edge_attr, weight_edge, att_neighbor, att_self,
        _, _, loop, _, _, num_dst, negative_slope, dropout,
    ) = inputs  # fmt: skip
    alpha, _, softmax, edges, seed = output
    ctx.mark_non_differentiable(edges, seed)
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(
        q_src, q_dst, value, edge_attr, weight_edge, att_neighbor, att_self,
        loop, alpha, softmax, edges, seed,
    )  # fmt: skip
    ctx.settings = (num_dst, negative_slope, dropout)


def _gradients(ctx, grad_alpha, grad_out, grad_softmax, backward):
    r"""Runs :obj:`backward` (:func:`_backward` or its custom operator) on
    what :func:`_setup_context` saved; returns a gradient per input."""
    inputs = ctx.saved_tensors[:_NUM_DIFFERENTIABLE]
    need = [
        n and t is not None
        for n, t in zip(ctx.needs_input_grad[:_NUM_DIFFERENTIABLE], inputs)
    ]
    grads = iter(
        backward(
            grad_alpha,
            grad_out,
            grad_softmax,
            *ctx.saved_tensors,
            *ctx.settings,
            need,
        )
    )
    return tuple(next(grads) if n else None for n in need) + (None,) * (
        _NUM_INPUTS - _NUM_DIFFERENTIABLE
    )


class _ChunkedAttention(torch.autograd.Function):
    # The eager form: on CPU tensors the compiled loops of `fused` where they
    # apply; its backward is differentiable (it runs the chunks then).
    @staticmethod
    def forward(*inputs):
        return fused.eager_forward(*inputs)

    setup_context = staticmethod(_setup_context)

    @staticmethod
    def backward(ctx, grad_alpha, grad_out, grad_softmax, _edges, _seed):
        return _gradients(
            ctx, grad_alpha, grad_out, grad_softmax, fused.eager_backward
        )


# The compiled form: the same two functions as custom operators -------------

_attention_op = torch.library.custom_op(
    'torch_geometric_gate::chunked_attention', _forward, mutates_args=()
)
_attention_backward_op = torch.library.custom_op(
    'torch_geometric_gate::chunked_attention_backward',
    _backward,
    mutates_args=(),
)


@_attention_op.register_fake
def _(*inputs):
    q_src, value, att_neighbor, src, num_dst, dropout = (
        inputs[i] for i in (0, 2, 5, 7, 12, 14)
    )
    num_edges, heads = src.size(0), att_neighbor.size(1)
    dtype = torch.promote_types(q_src.dtype, att_neighbor.dtype)
    alpha = q_src.new_empty(num_edges, heads, dtype=dtype)
    out_dtype = torch.promote_types(value.dtype, dtype)
    out = value.new_empty(num_dst, heads, value.size(2), dtype=out_dtype)
    drop = dropout > 0.0
    softmax = alpha.new_empty(num_edges if drop else 0, heads)
    index_dtype = _index_dtype(q_src.size(0), num_dst)
    edges = src.new_empty(2, num_edges, dtype=index_dtype)
    seed = torch.empty(1 if drop else 0, dtype=torch.int64)
    return alpha, out, softmax, edges, seed


@_attention_backward_op.register_fake
def _(*args):
    inputs, need = args[3 : 3 + _NUM_DIFFERENTIABLE], args[-1]
    return [
        torch.empty_like(t)
        for t, n in zip(inputs, need)
        if n and t is not None
    ]


def _op_backward(ctx, grad_alpha, grad_out, grad_softmax, _edges, _seed):
    return _gradients(
        ctx,
        grad_alpha,
        grad_out,
        grad_softmax,
        torch.ops.torch_geometric_gate.chunked_attention_backward,
    )


_attention_op.register_autograd(_op_backward, setup_context=_setup_context)


def chunked_attention(
    graph: AttentionGraph,
    params: AttentionParams,
    q_src: Tensor,
    q_dst: Tensor,
    value: Tensor,
    edge_attr: Optional[Tensor],
) -> Tuple[Tensor, Tensor]:
    r"""GATE's attention with the chunked kernels: returns the attention
    weights :obj:`[E, H]` (after dropout; returned whatever
    :obj:`params.need_weights` says, as the kernel computes them anyway) and
    the aggregated values :obj:`[N_dst, H, C]`.

    Eagerly it runs a :class:`torch.autograd.Function` (differentiable
    backward); under :func:`torch.compile` the custom operator
    ``torch_geometric_gate::chunked_attention`` (no graph break).

    Args:
        graph (AttentionGraph): The edges, self-loops included.
        params (AttentionParams): :math:`\mathbf{a}_s`, :math:`\mathbf{a}_t`,
            :math:`\mathbf{W}_e`, the slope (non-negative) and dropout.
        q_src, q_dst (torch.Tensor): :math:`\mathbf{U} \mathbf{x}` of the
            source nodes and :math:`\mathbf{V} \mathbf{x}` of the target
            nodes, :obj:`[N, H, C]`.
        value (torch.Tensor): :math:`\mathbf{W} \mathbf{x}` of the source
            nodes, :obj:`[N_src, H, C]`.
        edge_attr (torch.Tensor, optional): Edge features :obj:`[E, D]`
            (used with :obj:`params.weight_edge`).
    """
    if params.negative_slope < 0:
        raise ValueError(
            'The chunked kernels need a non-negative slope (got '
            f'{params.negative_slope})'
        )
    if not 0.0 <= params.dropout <= 1.0:
        raise ValueError(
            f'Expected a dropout probability in [0, 1] (got {params.dropout})'
        )
    heads, channels = params.att_neighbor.shape[1:]
    for name, t, rows in (
        ('q_src', q_src, graph.num_src),
        ('q_dst', q_dst, graph.num_dst),
        ('value', value, graph.num_src),
    ):
        if t.dim() != 3 or t.shape != (rows, heads, channels):
            raise ValueError(
                f"Expected '{name}' of shape [{rows}, {heads}, {channels}] "
                f'(got {list(t.shape)})'
            )
    inputs = (
        q_src, q_dst, value, edge_attr, params.weight_edge,
        params.att_neighbor, params.att_self, graph.src, graph.dst,
        graph.loop, graph.masked, graph.loops_masked_before, graph.num_dst,
        float(params.negative_slope),
        float(params.dropout) if params.training else 0.0,
    )  # fmt: skip
    if torch.compiler.is_compiling():
        out = torch.ops.torch_geometric_gate.chunked_attention(*inputs)
    else:
        out = _ChunkedAttention.apply(*inputs)
    return out[0], out[1]


# The operators' CPU kernels (compiled by Inductor) register on import:
from torch_geometric_gate.ops.chunked import loops as fused  # noqa: E402
