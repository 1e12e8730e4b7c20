r"""The two steps of the chunked kernels, the scores and the aggregation,
chunk by chunk over the edges, forward and backward (:func:`_scores`,
:func:`_score_backward`, :func:`_aggregate`, :func:`_aggregate_backward`),
which :func:`~torch_geometric_gate.ops.chunked.chunked_attention` runs
between its softmax and dropout; and the same two steps as autograd
functions of their own (:class:`EdgeScore`, :class:`EdgeAggregate`), which
the Triton kernels' double backward differentiates.
"""

from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from torch_geometric_gate.ops._compat import wrapped


def _chunks(num_edges: int, width: int, chunk: int):
    # Slices of the edges of about `chunk` elements (edges times `width`);
    # the size comes from the switch's settings
    # (`KernelSettings.chunk_size`).
    step = max(chunk // max(width, 1), 1)
    for start in range(0, num_edges, step):
        yield slice(start, min(start + step, num_edges))


def _activation(
    q_src: Tensor,
    q_dst: Tensor,
    edge_attr: Optional[Tensor],
    weight_edge: Optional[Tensor],
    src: Tensor,
    dst: Tensor,
    s: slice,
    negative_slope: float,
) -> Tensor:
    # In place: autograd saves none of these (double backward stays exact).
    z = q_src.index_select(0, src[s])
    z += q_dst.index_select(0, dst[s])
    if edge_attr is not None and weight_edge is not None:
        z += (edge_attr[s] @ weight_edge.t()).view_as(z)
    if negative_slope == 0.0:
        return z.relu_()
    return F.leaky_relu_(z, negative_slope)


def _scores(
    q_src: Tensor,
    q_dst: Tensor,
    edge_attr: Optional[Tensor],
    weight_edge: Optional[Tensor],
    src: Tensor,
    dst: Tensor,
    loop: Tensor,
    att: Tensor,  # [2, H, C]: a_s, a_t
    negative_slope: float,
    chunk: int,
) -> Tensor:
    dtype = torch.promote_types(q_src.dtype, att.dtype)
    # In the scores' dtype: an attention vector of a narrower dtype than the
    # projections (float32 by float64) cannot be a product's operand.
    att = att.to(dtype)
    heads, channels = att.shape[1:]
    e = q_src.new_empty(src.numel(), heads, dtype=dtype)
    # On the CPU both scores of every head come from one matrix product
    # with the block-diagonal [H * C, 2 * H] form of the attention vectors
    # (batched products of [c, C] by [C, 2] are several times slower). Its
    # work grows with H^2: up to 16 heads.
    cpu_block = att.device.type == 'cpu' and heads <= _BLOCK_HEADS
    block = _block_diagonal(att) if cpu_block else None

    def score(s: slice, by_block: bool) -> None:
        # The scores of the edges `s`, by the block product or per head.
        act = _activation(
            q_src, q_dst, edge_attr, weight_edge, src, dst, s, negative_slope
        ).to(dtype)
        if by_block and block is not None:
            both = (act.view(act.size(0), -1) @ block).view(-1, 2, heads)
        else:
            both = torch.einsum('chd,khd->ckh', act, att)
        e[s] = torch.where(loop[s].view(-1, 1), both[:, 1], both[:, 0])

    for s in _chunks(src.numel(), heads * channels, chunk):
        score(s, by_block=True)
    # An infinite activation times the zeros of the other heads' blocks is
    # NaN in every head: the chunks that hold a NaN are scored per head
    # (one check of the whole [E, H] tensor, not one per chunk).
    if block is not None and e.isnan().any():
        for s in _chunks(src.numel(), heads * channels, chunk):
            if e[s].isnan().any():
                score(s, by_block=False)
    return e


_BLOCK_HEADS = 16


def _finite(t: Tensor) -> bool:
    r"""Whether :obj:`t` is finite, :obj:`False` where that cannot be asked
    (:func:`~torch_geometric_gate.ops._compat.wrapped`)."""
    return not wrapped(t) and bool(torch.isfinite(t).all())


def _block_diagonal(att: Tensor) -> Tensor:
    r"""The attention vectors :obj:`[2, H, C]` as the block-diagonal
    :obj:`[H * C, 2 * H]` matrix whose column :obj:`k * H + h` holds
    :obj:`att[k, h]` in the rows of head :obj:`h`."""
    heads, channels = att.shape[1:]
    eye = torch.eye(heads, dtype=att.dtype, device=att.device)
    block = att.permute(1, 2, 0).unsqueeze(-1) * eye.view(heads, 1, 1, heads)
    return block.reshape(heads * channels, 2 * heads)


# The backward accumulates chunk by chunk into gradient buffers, in place.
# It makes them from the incoming gradient (`grad.new_zeros`, not
# `torch.zeros_like(input)`): under vmap (`is_grads_batched=True`,
# `jacobian(..., vectorize=True)`) the gradient is batched, and so are the
# buffers then (an in-place write of a batched tensor into a plain one is
# impossible); eagerly they are the same plain tensors.
def _zeros_as(grad: Tensor, like: Tensor) -> Tensor:
    return grad.new_zeros(like.shape, dtype=like.dtype)


def _empty_as(grad: Tensor, like: Tensor) -> Tensor:
    return grad.new_empty(like.shape, dtype=like.dtype)


def _score_backward(
    grad_e: Tensor,
    q_src: Tensor,
    q_dst: Tensor,
    edge_attr: Optional[Tensor],
    weight_edge: Optional[Tensor],
    src: Tensor,
    dst: Tensor,
    loop: Tensor,
    att: Tensor,
    slope: float,
    need: List[bool],  # q_src, q_dst, edge_attr, weight_edge, att
    chunk: int,
) -> Tuple[Optional[Tensor], ...]:
    grad_src = _zeros_as(grad_e, q_src) if need[0] else None
    grad_dst = _zeros_as(grad_e, q_dst) if need[1] else None
    grad_attr = None
    if need[2] and edge_attr is not None:
        grad_attr = _empty_as(grad_e, edge_attr)
    grad_weight = None
    if need[3] and weight_edge is not None:
        grad_weight = _zeros_as(grad_e, weight_edge)
    grad_att = _zeros_as(grad_e, att) if need[4] else None
    # With `create_graph=True` this backward is differentiated in turn:
    # no in-place op on a tensor that autograd saves (accumulating into the
    # fresh gradient buffers in place is safe, and avoids a copy of them per
    # chunk).
    heads = att.size(1)
    cpu_block = att.device.type == 'cpu' and heads <= _BLOCK_HEADS
    g_split = None
    if grad_att is not None:
        # [E, 2, H]: the gradients of the neighbor and self scores
        g_loop = grad_e.masked_fill(~loop.view(-1, 1), 0.0)
        g_split = torch.stack([grad_e - g_loop, g_loop], dim=1)
    # One product per chunk for g_z where every gradient is finite (a
    # non-finite one would leak NaN into the other heads):
    block = None
    if cpu_block and g_split is not None and _finite(grad_e):
        block = _block_diagonal(att.to(grad_e.dtype))
    for s in _chunks(src.numel(), att.size(1) * att.size(2), chunk):
        act = _activation(
            q_src, q_dst, edge_attr, weight_edge, src, dst, s, slope
        )
        g = grad_e[s]
        g2 = None if g_split is None else g_split[s]
        if g2 is not None and grad_att is not None:
            act_g = act.to(g2.dtype)
            if cpu_block:
                # 'ckh,chd->khd' as one product [2H, c] @ [c, H * C] whose
                # diagonal blocks are kept (what the other blocks may hold,
                # NaN from an infinite activation included, is dropped):
                rows = g2.size(0)
                full = g2.view(rows, -1).t() @ act_g.view(rows, -1)
                g_att = full.view(2, heads, heads, -1).diagonal(0, 1, 2)
                grad_att += g_att.transpose(1, 2)
            else:
                # A batched product ([H, 2, c] @ [H, c, C]): `einsum` has no
                # batching rule under `is_grads_batched=True`.
                g_att = g2.permute(2, 1, 0) @ act_g.transpose(0, 1)
                grad_att += g_att.transpose(0, 1)
        if block is not None and g2 is not None:
            # [c, 2H] @ [2H, H * C]: each head's vector times its gradient.
            g_z = (g2.view(g2.size(0), -1) @ block.t()).view_as(act)
            g_z = g_z.to(act.dtype)
        else:
            g_z = torch.where(loop[s].view(-1, 1, 1), att[1], att[0])
            g_z = (g_z * g.unsqueeze(-1)).to(act.dtype)
        if slope == 0.0:
            g_z = torch.ops.aten.threshold_backward(g_z, act, 0.0)
        else:
            g_z = torch.ops.aten.leaky_relu_backward(g_z, act, slope, True)
        # Under autocast the projections (and so their gradients) may have
        # another dtype than the attention vectors:
        if grad_src is not None:
            grad_src.index_add_(0, src[s], g_z.to(q_src.dtype))
        if grad_dst is not None:
            grad_dst.index_add_(0, dst[s], g_z.to(q_dst.dtype))
        if edge_attr is not None and weight_edge is not None:
            g_flat = g_z.view(g_z.size(0), -1)
            if grad_attr is not None:
                grad_attr[s] = (g_flat @ weight_edge.to(g_flat.dtype)).to(
                    grad_attr.dtype
                )
            if grad_weight is not None:
                grad_weight += (g_flat.t() @ edge_attr[s].to(g_flat.dtype)).to(
                    grad_weight.dtype
                )
    return grad_src, grad_dst, grad_attr, grad_weight, grad_att


def _aggregate(
    x: Tensor,
    alpha: Tensor,
    src: Tensor,
    dst: Tensor,
    num_dst: int,
    chunk: int,
) -> Tensor:
    dtype = torch.promote_types(x.dtype, alpha.dtype)
    out = x.new_zeros(num_dst, x.size(1), x.size(2), dtype=dtype)
    for s in _chunks(src.numel(), x.size(1) * x.size(2), chunk):
        msg = x.index_select(0, src[s]).to(dtype)
        msg *= alpha[s].unsqueeze(-1)
        out.index_add_(0, dst[s], msg)
    return out


def _aggregate_backward(
    grad_out: Tensor,
    x: Tensor,
    alpha: Tensor,
    src: Tensor,
    dst: Tensor,
    need_x: bool,
    need_alpha: bool,
    chunk: int,
) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    grad_x = _zeros_as(grad_out, x) if need_x else None
    grad_alpha = _empty_as(grad_out, alpha) if need_alpha else None
    grad_out = grad_out.contiguous()
    for s in _chunks(src.numel(), x.size(1) * x.size(2), chunk):
        g = grad_out.index_select(0, dst[s])
        if grad_alpha is not None:
            x_j = x.index_select(0, src[s]).to(g.dtype)
            grad_alpha[s] = (g * x_j).sum(-1).to(grad_alpha.dtype)
        if grad_x is not None:
            g_x = (g * alpha[s].unsqueeze(-1)).to(x.dtype)
            grad_x.index_add_(0, src[s], g_x)
    return grad_x, grad_alpha


class EdgeScore(torch.autograd.Function):
    r"""The attention logits :math:`e_{u,v} = \mathbf{a}^{\top} \phi(
    \mathbf{U} \mathbf{x}_u + \mathbf{V} \mathbf{x}_v + \mathbf{W}_e
    \mathbf{e}_{u,v})` of every edge and head as an :obj:`[E, H]` tensor,
    with :math:`\mathbf{a} = \mathbf{a}_t` on self-loops and
    :math:`\mathbf{a}_s` elsewhere; every head is scored with its own
    vectors only. Saves its inputs; :math:`\phi(\cdot)` is recomputed in
    backward (the sign of :math:`\phi`'s output tells its slope, so
    :obj:`negative_slope` must be non-negative). Its backward is
    differentiable.
    """

    @staticmethod
    def forward(
        q_src: Tensor,  # [N_src, H, C]
        q_dst: Tensor,  # [N_dst, H, C]
        edge_attr: Optional[Tensor],  # [E, D]
        weight_edge: Optional[Tensor],  # [H * C, D]
        src: Tensor,  # [E]
        dst: Tensor,  # [E]
        loop: Tensor,  # [E], bool: scored with `att_self`
        att_neighbor: Tensor,  # [1, H, C]
        att_self: Tensor,  # [1, H, C]
        negative_slope: float,
        chunk: int,  # edge elements per chunk
    ) -> Tensor:
        att = torch.cat([att_neighbor, att_self], dim=0)  # [2, H, C]
        return _scores(
            q_src, q_dst, edge_attr, weight_edge, src, dst, loop, att,
            negative_slope, chunk,
        )  # fmt: skip

    @staticmethod
    def setup_context(ctx, inputs, output):
        (
            q_src, q_dst, edge_attr, weight_edge, src, dst, loop,
            att_neighbor, att_self, ctx.negative_slope, ctx.chunk,
        ) = inputs  # fmt: skip
        ctx.save_for_backward(
            q_src, q_dst, edge_attr, weight_edge, src, dst, loop,
            att_neighbor, att_self,
        )  # fmt: skip

    @staticmethod
    def backward(ctx, grad_e: Tensor):
        q_src, q_dst, edge_attr, weight_edge, src, dst, loop = (
            ctx.saved_tensors[:7]
        )
        att = torch.cat(ctx.saved_tensors[7:], dim=0)  # [2, H, C]
        need = ctx.needs_input_grad
        grads = _score_backward(
            grad_e, q_src, q_dst, edge_attr, weight_edge, src, dst, loop,
            att, ctx.negative_slope,
            [need[0], need[1], need[2], need[3], need[7] or need[8]],
            ctx.chunk,
        )  # fmt: skip
        grad_att = grads[4]
        return (
            *grads[:4],
            None,
            None,
            None,
            grad_att[:1] if need[7] else None,
            grad_att[1:] if need[8] else None,
            None,
            None,
        )


class EdgeAggregate(torch.autograd.Function):
    r"""The weighted sum :math:`\sum_{(u, v)} \alpha_{u,v} \mathbf{x}_u` per
    target node and head, as an :obj:`[N_dst, H, C]` tensor summed in the
    dtype of :obj:`alpha` (float32 or wider). Saves :obj:`x`, :obj:`alpha`
    and the edge index; the gathered messages are recomputed in backward,
    which is differentiable.
    """

    @staticmethod
    def forward(
        x: Tensor,  # [N_src, H, C]
        alpha: Tensor,  # [E, H]
        src: Tensor,
        dst: Tensor,
        num_dst: int,
        chunk: int,  # edge elements per chunk
    ) -> Tensor:
        return _aggregate(x, alpha, src, dst, num_dst, chunk)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, alpha, src, dst, _, ctx.chunk = inputs
        ctx.save_for_backward(x, alpha, src, dst)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        x, alpha, src, dst = ctx.saved_tensors
        need = ctx.needs_input_grad
        grad_x, grad_alpha = _aggregate_backward(
            grad_out, x, alpha, src, dst, need[0], need[1], ctx.chunk
        )
        return grad_x, grad_alpha, None, None, None, None
