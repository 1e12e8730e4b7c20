r"""Memory-lean edge kernels of :class:`GATEConv` for eager mode.

Autograd saves the :obj:`[E, H, C]` edge tensors of a plain implementation
(the gathered node projections, :math:`\phi(\mathbf{U} \mathbf{x}_u +
\mathbf{V} \mathbf{x}_v)`, the gathered messages) for backward. The two
functions below save only the node tensors, the edge index and :obj:`[E, H]`
tensors, and recompute every :obj:`[E, H, C]` tensor in backward, chunk by
chunk over the edges, so that no :obj:`[E, H, C]` tensor is ever held whole.
Their gradients are exact (no approximation: they equal the plain path's up
to float rounding).

TorchScript cannot script a :class:`torch.autograd.Function`, and the
chunk loop is Python control flow that :func:`torch.compile` would unroll,
so both use the plain message passing of :class:`GATEConv` instead. Under
:func:`torch.compile` it saves no :obj:`[E, H, C]` tensor either: Inductor
fuses the forward score without an :obj:`[E, H, C]` activation, and the
aggregation runs under activation checkpointing, so that the gathered
messages are gathered again in backward (the compiled step still writes
transient :obj:`[E, H, C]` buffers: see the benchmark page).
"""

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

# Edges per chunk times `heads * out_channels`: bounds each `[chunk, H, C]`
# temporary to 1 MB in float32 (cache-sized: the passes over a chunk after
# its gathers hit the cache; measured on CPU, see `benchmark/`).
CHUNK_ELEMENTS = 2**18
# On accelerators, chunks of 64 MB: kernel launches, not caches, set the
# pace there.
DEVICE_CHUNK_ELEMENTS = 2**24


def _chunks(num_edges: int, width: int, device: torch.device):
    size = CHUNK_ELEMENTS if device.type == 'cpu' else DEVICE_CHUNK_ELEMENTS
    step = max(size // max(width, 1), 1)
    for start in range(0, num_edges, step):
        yield slice(start, min(start + step, num_edges))


def _activate_(z: Tensor, negative_slope: float) -> Tensor:
    if negative_slope == 0.0:
        return z.relu_()
    return F.leaky_relu_(z, negative_slope)


def _both_scores(act: Tensor, att: Tensor) -> Tensor:
    r"""Returns :math:`\mathbf{a}_s^{\top} \phi` and :math:`\mathbf{a}_t^{\top}
    \phi` of every edge and head as a :obj:`[c, 2, H]` tensor, for the
    activation :obj:`act` of shape :obj:`[c, H, C]`. One GEMM scores every
    head's activation with every head's vectors; only the matching pairs
    (the diagonal) are kept, so that an overflowing head cannot turn
    another head's score into NaN (as a block-diagonal matrix would,
    with :math:`0 \cdot \infty`).
    """
    c, heads, channels = act.shape
    out = act.reshape(c * heads, channels) @ att.view(-1, channels).t()
    return out.view(c, heads, 2, heads).diagonal(dim1=1, dim2=3)


def _pre_activation(
    q_src: Tensor,
    q_dst: Tensor,
    edge_attr: Optional[Tensor],
    weight_edge: Optional[Tensor],
    src: Tensor,
    dst: Tensor,
    s: slice,
) -> Tensor:
    z = q_src.index_select(0, src[s])
    z += q_dst.index_select(0, dst[s])
    if edge_attr is not None and weight_edge is not None:
        z += (edge_attr[s] @ weight_edge.t()).view_as(z)
    return z


class EdgeScore(torch.autograd.Function):
    r"""The attention logits :math:`e_{u,v} = \mathbf{a}^{\top} \phi(
    \mathbf{q}^{src}_u + \mathbf{q}^{dst}_v + \mathbf{W}_e \mathbf{e}_{u,v})`
    of every edge and head, with :math:`\mathbf{a} = \mathbf{a}_t` on
    self-loops and :math:`\mathbf{a}_s` elsewhere, as an :obj:`[E, H]`
    tensor. Saves the inputs only; :math:`\phi(\cdot)` is recomputed in
    backward. Every head is scored on its own.
    """

    @staticmethod
    def forward(
        q_src: Tensor,  # [N_src, H, C]
        q_dst: Tensor,  # [N_dst, H, C]
        edge_attr: Optional[Tensor],  # [E, D]
        weight_edge: Optional[Tensor],  # [H * C, D]
        src: Tensor,  # [E]
        dst: Tensor,  # [E]
        self_mask: Tensor,  # [E], bool
        att_neighbor: Tensor,  # [1, H, C]
        att_self: Tensor,  # [1, H, C]
        negative_slope: float,
    ) -> Tensor:
        att = torch.cat([att_neighbor, att_self], dim=0)  # [2, H, C]
        num_edges, heads = src.numel(), att.size(1)
        e = q_src.new_empty(num_edges, heads)
        for s in _chunks(num_edges, att[0].numel(), att.device):
            z = _pre_activation(
                q_src, q_dst, edge_attr, weight_edge, src, dst, s
            )
            both = _both_scores(_activate_(z, negative_slope), att)
            e[s] = torch.where(
                self_mask[s].view(-1, 1), both[:, 1], both[:, 0]
            )
        return e

    @staticmethod
    def setup_context(ctx, inputs, output):
        (q_src, q_dst, edge_attr, weight_edge, src, dst, self_mask) = inputs[
            :7
        ]
        att_neighbor, att_self, negative_slope = inputs[7:]
        ctx.save_for_backward(
            q_src,
            q_dst,
            edge_attr,
            weight_edge,
            src,
            dst,
            self_mask,
            att_neighbor,
            att_self,
        )
        ctx.negative_slope = negative_slope

    @staticmethod
    def backward(ctx, grad_e: Tensor):
        (q_src, q_dst, edge_attr, weight_edge, src, dst, self_mask) = (
            ctx.saved_tensors[:7]
        )
        att = torch.cat(ctx.saved_tensors[7:], dim=0)  # [2, H, C]
        slope = ctx.negative_slope
        need = ctx.needs_input_grad
        grad_src = torch.zeros_like(q_src) if need[0] else None
        grad_dst = torch.zeros_like(q_dst) if need[1] else None
        grad_attr = torch.empty_like(edge_attr) if need[2] else None
        grad_weight = torch.zeros_like(weight_edge) if need[3] else None
        grad_att = torch.zeros_like(att)
        heads = att.size(1)
        for s in _chunks(src.numel(), att[0].numel(), att.device):
            act = _activate_(
                _pre_activation(
                    q_src, q_dst, edge_attr, weight_edge, src, dst, s
                ),
                slope,
            )
            loop = self_mask[s].view(-1, 1)
            g = grad_e[s]
            if need[7] or need[8]:
                # [c, 2 * H]: the gradients of the neighbor and self scores.
                g2 = torch.cat(
                    [g.masked_fill(loop, 0.0), g.masked_fill(~loop, 0.0)], 1
                )
                # All pairs of heads in one GEMM; only the diagonal is kept,
                # so that no head reads another head's values:
                pairs = g2.t() @ act.view(act.size(0), -1)  # [2H, H * C]
                pairs = pairs.view(2, heads, heads, -1)
                grad_att += pairs.diagonal(dim1=1, dim2=2).transpose(1, 2)
            g_z = torch.where(loop.unsqueeze(-1), att[1], att[0])
            g_z.mul_(g.unsqueeze(-1))
            if slope == 0.0:
                g_z = torch.ops.aten.threshold_backward(g_z, act, 0.0)
            else:
                g_z = torch.ops.aten.leaky_relu_backward(g_z, act, slope, True)
            # `g_z` has the attention vectors' dtype; under autocast the
            # projections (and so their gradients) are in lower precision:
            if grad_src is not None:
                grad_src.index_add_(0, src[s], g_z.to(grad_src.dtype))
            if grad_dst is not None:
                grad_dst.index_add_(0, dst[s], g_z.to(grad_dst.dtype))
            if grad_attr is not None or grad_weight is not None:
                g_flat = g_z.view(g_z.size(0), -1)
                if grad_attr is not None:
                    grad_attr[s] = g_flat @ weight_edge
                if grad_weight is not None:
                    grad_weight += g_flat.t() @ edge_attr[s]
        return (
            grad_src,
            grad_dst,
            grad_attr,
            grad_weight,
            None,
            None,
            None,
            grad_att[:1] if need[7] else None,
            grad_att[1:] if need[8] else None,
            None,
        )


class EdgeAggregate(torch.autograd.Function):
    r"""The weighted sum :math:`\mathbf{out}_v = \sum_{(u, v)}
    \alpha_{u,v} \mathbf{x}_u` per head, as an :obj:`[N_dst, H, C]` tensor.
    Saves :obj:`x`, :obj:`alpha` and the edge index; the gathered messages
    are recomputed in backward.
    """

    @staticmethod
    def forward(
        x: Tensor,  # [N_src, H, C]
        alpha: Tensor,  # [E, H]
        src: Tensor,
        dst: Tensor,
        num_dst: int,
    ) -> Tensor:
        out = x.new_zeros(num_dst, x.size(1), x.size(2))
        for s in _chunks(src.numel(), x[0].numel(), x.device):
            msg = x.index_select(0, src[s])
            msg *= alpha[s].unsqueeze(-1)
            out.index_add_(0, dst[s], msg)
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, alpha, src, dst, _ = inputs
        ctx.save_for_backward(x, alpha, src, dst)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        x, alpha, src, dst = ctx.saved_tensors
        need = ctx.needs_input_grad
        grad_x = torch.zeros_like(x) if need[0] else None
        grad_alpha = torch.empty_like(alpha) if need[1] else None
        grad_out = grad_out.contiguous()
        for s in _chunks(src.numel(), x[0].numel(), x.device):
            g = grad_out.index_select(0, dst[s])
            if grad_alpha is not None:
                grad_alpha[s] = (g * x.index_select(0, src[s])).sum(-1)
            if grad_x is not None:
                g *= alpha[s].unsqueeze(-1)
                grad_x.index_add_(0, src[s], g)
        return grad_x, grad_alpha, None, None, None


def fused_attention(
    q_src: Tensor,
    q_dst: Tensor,
    edge_attr: Optional[Tensor],
    weight_edge: Optional[Tensor],
    edge_index: Tensor,
    self_mask: Tensor,
    att_neighbor: Tensor,
    att_self: Tensor,
    negative_slope: float,
) -> Tensor:
    r"""Returns the :obj:`[E, H]` attention logits (see :class:`EdgeScore`)."""
    return EdgeScore.apply(
        q_src,
        q_dst,
        edge_attr,
        weight_edge,
        edge_index[0],
        edge_index[1],
        self_mask,
        att_neighbor,
        att_self,
        negative_slope,
    )


def fused_aggregate(
    x: Tensor, alpha: Tensor, edge_index: Tensor, num_dst: int
) -> Tensor:
    r"""Returns :math:`\sum_{(u, v)} \alpha_{u,v} \mathbf{x}_u` per target
    node and head (see :class:`EdgeAggregate`).
    """
    return EdgeAggregate.apply(x, alpha, edge_index[0], edge_index[1], num_dst)
