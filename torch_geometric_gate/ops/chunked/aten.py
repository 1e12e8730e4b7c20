r"""The chunked kernels' ATen form: GATE's attention in chunks of ATen
operations over the edges (:func:`forward`, :func:`backward`), which run on
every device and differentiate again (double backward); and the helpers
that the compiled CPU loops (:mod:`~torch_geometric_gate.ops.chunked.
loops`) share with them.
"""

from typing import List, Optional

import torch
from torch import Tensor

from torch_geometric_gate.ops.chunked.schema import (
    BackwardInputs,
    BackwardReturns,
    ForwardReturns,
    Inputs,
)
from torch_geometric_gate.ops.chunked.steps import (
    _aggregate,
    _aggregate_backward,
    _score_backward,
    _scores,
)
from torch_geometric_gate.ops.switch import chunk_size
from torch_geometric_gate.ops.types import edge_flags


def index_dtype(num_src: int, num_dst: int) -> torch.dtype:
    # The narrowest index that `index_select` and `index_add_` take:
    return torch.int32 if max(num_src, num_dst) < 2**31 else torch.int64


def dropout_noise(shape: List[int], p: float, like: Tensor) -> Tensor:
    r"""The dropout multiplier :obj:`[E, H]` of :obj:`like`'s dtype and
    device: :obj:`0` with probability :obj:`p`, else :obj:`1 / (1 - p)`, as
    :func:`torch.nn.functional.dropout` scales, drawn by the device's
    generator (:func:`torch.manual_seed` reproduces it; PyTorch's CUDA
    generator is safe to capture in a CUDA graph)."""
    noise = like.new_empty(shape).bernoulli_(1.0 - p)
    return noise.mul_(1.0 / (1.0 - p) if p < 1.0 else 0.0)


def kept_noise(alpha: Tensor, p: float) -> Tensor:
    r"""The multiplier that dropout applied, read back from the weights
    after dropout :obj:`alpha`: :obj:`1 / (1 - p)` where they are not zero,
    else :obj:`0`. It differs from the drawn one only where the softmax is
    zero too, where the softmax's backward multiplies every gradient by
    that zero (a weight kept is the softmax times :obj:`1 / (1 - p) >= 1`:
    zero only where the softmax is)."""
    return (alpha != 0).to(alpha.dtype) * (1.0 / (1.0 - p) if p < 1.0 else 0.0)


def forward(i: Inputs) -> ForwardReturns:
    r"""Returns the attention weights :obj:`[E, H]` (after dropout), the
    aggregated values :obj:`[N_dst, H, C]`, and what backward needs: the
    softmax before dropout (:obj:`[E, H]`, empty without dropout) and the
    edge index :obj:`[2, E]` (:obj:`int32` where the node count allows).
    The flags are those of :func:`edge_flags`; the ATen operations in
    chunks of :obj:`i.chunk` edge elements."""
    att = torch.cat([i.att_neighbor, i.att_self], dim=0)  # [2, H, C]
    src, dst = i.src.long(), i.dst.long()
    loop, masked = edge_flags(
        src, dst, i.loop, i.masked, i.loops_masked_before or None
    )
    chunk = chunk_size(i.chunk, src.device)
    e = _scores(
        i.q_src, i.q_dst, i.edge_attr, i.weight_edge, src, dst, loop, att,
        i.negative_slope, chunk,
    )  # fmt: skip
    # Half-precision scores are normalized and summed in float32 (a sum
    # over a hub's edges in float16 drifts: issue 50.3):
    dtype = e.dtype
    e = e.to(accumulation_dtype(dtype))
    if masked is not None:
        e.masked_fill_(masked.view(-1, 1), float('-inf'))
    # PyG's softmax (`torch_geometric.utils.softmax`), in place:
    heads, num_dst, dropout = e.size(1), i.num_dst, i.dropout
    index = dst.view(-1, 1).expand_as(e)
    # -inf where a node has no edge (never read): no pass to exclude it.
    e_max = e.new_full((num_dst, heads), float('-inf'))
    e_max.scatter_reduce_(0, index, e, 'amax')
    if masked is not None:  # A node whose edges are all masked gets 0:
        e_max.masked_fill_(e_max == float('-inf'), 0.0)
    alpha = e.sub_(e_max.index_select(0, dst)).exp_()
    total = e.new_zeros(num_dst, heads).index_add_(0, dst, alpha).add_(1e-16)
    alpha.div_(total.index_select(0, dst))
    softmax = alpha.new_empty(0, heads)
    if dropout > 0.0:
        softmax = alpha
        # Drawn in the weights' dtype, as the compiled loops draw it:
        like = alpha.new_empty(0, dtype=dtype)
        alpha = alpha * dropout_noise(list(alpha.shape), dropout, like)
    out_dtype = torch.promote_types(i.value.dtype, dtype)
    out = _aggregate(i.value, alpha, src, dst, num_dst, chunk)
    out = out.to(out_dtype)
    edges = torch.stack([src, dst]).to(index_dtype(i.q_src.size(0), num_dst))
    return alpha.to(dtype), out, softmax.to(dtype), edges


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    r"""The dtype that sums of :obj:`dtype` values accumulate in: float32
    for half precision, else :obj:`dtype`."""
    return torch.promote_types(dtype, torch.float32)


def needed_grads(grads: List[Optional[Tensor]], need: List[bool]):
    r"""From the gradients of :obj:`q_src, q_dst, value, edge_attr,
    weight_edge` and of :obj:`[a_s; a_t]` (:obj:`[2, H, C]`), those that
    :obj:`need` asks for (of the backward's seven inputs), in order, as the
    custom operator returns them: contiguous, as its fake implementation
    says (a permuted input's :obj:`zeros_like` is not)."""
    grad_att = grads[5]
    grads = (
        list(grads[:5])
        + [  # Halves of one tensor: cloned.
            grad_att[:1].clone() if need[5] and grad_att is not None else None,
            grad_att[1:].clone() if need[6] and grad_att is not None else None,
        ]
    )
    return [g.contiguous() for g, n in zip(grads, need) if n and g is not None]


def backward(i: BackwardInputs) -> BackwardReturns:
    r"""The gradients of :func:`forward`'s inputs :obj:`q_src, q_dst,
    value, edge_attr, weight_edge, att_neighbor, att_self` where
    :obj:`need` asks for them (and the input is not :obj:`None`), in that
    order, from those of its outputs :obj:`alpha`, :obj:`out` and
    :obj:`softmax`; made of differentiable operations only (double
    backward). As a custom operator wants: no :obj:`None`, and no view of
    an input or of another output."""
    # Saved as int32 where it fits, indexed as int64: on the CPU,
    # `index_select` and `index_add_` with an int32 index are several times
    # slower (a transient copy of 16 bytes per edge).
    src, dst = i.edges[0].long(), i.edges[1].long()
    loop = src == dst if i.loop is None else i.loop  # See `edge_flags`.
    need, alpha, value, dropout = i.need, i.alpha, i.value, i.dropout
    chunk = chunk_size(i.chunk, src.device)
    need_score = any(need[:2]) or any(need[3:])
    grad_value, g = None, None
    if i.grad_out is not None:
        grad_value, g = _aggregate_backward(
            i.grad_out, value, alpha, src, dst, need[2], need_score, chunk
        )
    if grad_value is None and need[2]:  # `out` took no part in the loss.
        grad_value = torch.zeros_like(value)
    if not need_score:
        return [grad_value.contiguous()] if need[2] else []
    # The gradient of the attention weights after dropout, then before:
    if i.grad_alpha is not None:
        g = i.grad_alpha if g is None else g + i.grad_alpha
    if g is None:
        g = torch.zeros_like(alpha)
    if dropout > 0.0:
        g = g * kept_noise(alpha, dropout)
        alpha = i.softmax
    if i.grad_softmax is not None and i.grad_softmax.numel() > 0:
        g = g + i.grad_softmax
    # The softmax's backward: alpha * (g - sum over the incoming edges),
    # summed in float32 for half precision:
    dtype = alpha.dtype
    acc = accumulation_dtype(dtype)
    alpha, g = alpha.to(acc), g.to(acc)
    g = alpha * g
    total = g.new_zeros(i.num_dst, g.size(1)).index_add(0, dst, g)
    grad_e = (g - alpha * total.index_select(0, dst)).to(dtype)
    att = torch.cat([i.att_neighbor, i.att_self], dim=0)
    need_score = [need[0], need[1], need[3], need[4], need[5] or need[6]]
    grad_src, grad_dst, grad_attr, grad_weight, grad_att = _score_backward(
        grad_e, i.q_src, i.q_dst, i.edge_attr, i.weight_edge, src, dst, loop,
        att, i.negative_slope, need_score, chunk,
    )  # fmt: skip
    grads = [grad_src, grad_dst, grad_value, grad_attr, grad_weight, grad_att]
    return needed_grads(grads, need)
