r"""The chunked kernels: GATE's attention without any :obj:`[E, H, C]`
tensor saved for backward.

Autograd saves the :obj:`[E, H, C]` edge tensors of the reference path (the
gathered projections, the activation :math:`\phi(\mathbf{U} \mathbf{x}_u +
\mathbf{V} \mathbf{x}_v)`, the gathered messages) for backward. The two
:class:`torch.autograd.Function` classes below save only node tensors, the
edge index and :obj:`[E, H]` tensors, and recompute every :obj:`[E, H, C]`
tensor in backward, chunk by chunk over the edges, so that none is ever held
whole. Their gradients are exact, and their backward is itself
differentiable (double backward, gradient penalties). Messages are summed
in float32 (or wider) whatever the dtype of the projections.
"""

from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.utils import softmax

# Elements (edges times `heads * out_channels`) per chunk, by device kind.
# CPU: 1 MB of float32, so that the passes over a chunk after its gathers
# hit the cache (measured, see `benchmark/`). Accelerators: 16 MB, under an
# H100's 50 MB L2, large enough that kernel launches do not set the pace.
CHUNK_ELEMENTS: Dict[str, int] = {'cpu': 2**18}
DEFAULT_CHUNK_ELEMENTS = 2**22


def _chunks(num_edges: int, width: int, device: torch.device):
    size = CHUNK_ELEMENTS.get(device.type, DEFAULT_CHUNK_ELEMENTS)
    step = max(size // max(width, 1), 1)
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


class EdgeScore(torch.autograd.Function):
    r"""The attention logits :math:`e_{u,v} = \mathbf{a}^{\top} \phi(
    \mathbf{U} \mathbf{x}_u + \mathbf{V} \mathbf{x}_v + \mathbf{W}_e
    \mathbf{e}_{u,v})` of every edge and head as an :obj:`[E, H]` tensor,
    with :math:`\mathbf{a} = \mathbf{a}_t` on self-loops and
    :math:`\mathbf{a}_s` elsewhere; every head is scored with its own
    vectors only. Saves its inputs; :math:`\phi(\cdot)` is recomputed in
    backward (the sign of :math:`\phi`'s output tells its slope, so
    :obj:`negative_slope` must be non-negative).
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
    ) -> Tensor:
        att = torch.cat([att_neighbor, att_self], dim=0)  # [2, H, C]
        dtype = torch.promote_types(q_src.dtype, att.dtype)
        e = q_src.new_empty(src.numel(), att.size(1), dtype=dtype)
        for s in _chunks(src.numel(), att.size(1) * att.size(2), att.device):
            act = _activation(
                q_src, q_dst, edge_attr, weight_edge, src, dst, s,
                negative_slope,
            )  # fmt: skip
            both = torch.einsum('chd,khd->chk', act.to(dtype), att)
            e[s] = torch.where(loop[s].view(-1, 1), both[..., 1], both[..., 0])
        return e

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs[:9])
        ctx.negative_slope = inputs[9]

    @staticmethod
    def backward(ctx, grad_e: Tensor):
        q_src, q_dst, edge_attr, weight_edge, src, dst, loop = (
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
        # With `create_graph=True` this backward is differentiated in turn:
        # no in-place op on a tensor that autograd saves (accumulating into
        # the fresh gradient buffers in place is safe, and avoids a copy of
        # them per chunk).
        for s in _chunks(src.numel(), att.size(1) * att.size(2), att.device):
            act = _activation(
                q_src, q_dst, edge_attr, weight_edge, src, dst, s, slope
            )
            is_loop = loop[s].view(-1, 1)
            g = grad_e[s]
            if need[7] or need[8]:
                # [c, H, 2]: the gradients of the neighbor and self scores
                g_loop = g.masked_fill(~is_loop, 0.0)
                g2 = torch.stack([g - g_loop, g_loop], dim=-1)
                grad_att += torch.einsum('chk,chd->khd', g2, act.to(g2.dtype))
            g_z = torch.where(is_loop.unsqueeze(-1), att[1], att[0])
            g_z = (g_z * g.unsqueeze(-1)).to(act.dtype)
            if slope == 0.0:
                g_z = torch.ops.aten.threshold_backward(g_z, act, 0.0)
            else:
                g_z = torch.ops.aten.leaky_relu_backward(g_z, act, slope, True)
            # Under autocast the projections (and so their gradients) may
            # have another dtype than the attention vectors:
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
                    grad_weight += (
                        g_flat.t() @ edge_attr[s].to(g_flat.dtype)
                    ).to(grad_weight.dtype)
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
    r"""The weighted sum :math:`\sum_{(u, v)} \alpha_{u,v} \mathbf{x}_u` per
    target node and head, as an :obj:`[N_dst, H, C]` tensor summed in the
    dtype of :obj:`alpha` (float32 or wider). Saves :obj:`x`, :obj:`alpha`
    and the edge index; the gathered messages are recomputed in backward.
    """

    @staticmethod
    def forward(
        x: Tensor,  # [N_src, H, C]
        alpha: Tensor,  # [E, H]
        src: Tensor,
        dst: Tensor,
        num_dst: int,
    ) -> Tensor:
        dtype = torch.promote_types(x.dtype, alpha.dtype)
        out = x.new_zeros(num_dst, x.size(1), x.size(2), dtype=dtype)
        for s in _chunks(src.numel(), x.size(1) * x.size(2), x.device):
            msg = x.index_select(0, src[s]).to(dtype)
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
        for s in _chunks(src.numel(), x.size(1) * x.size(2), x.device):
            g = grad_out.index_select(0, dst[s])
            if grad_alpha is not None:
                x_j = x.index_select(0, src[s]).to(g.dtype)
                grad_alpha[s] = (g * x_j).sum(-1).to(grad_alpha.dtype)
            if grad_x is not None:
                g_x = (g * alpha[s].unsqueeze(-1)).to(x.dtype)
                grad_x.index_add_(0, src[s], g_x)
        return grad_x, grad_alpha, None, None, None


def chunked_attention(
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
) -> Tuple[Tensor, Tensor]:
    r"""GATE's attention with the chunked kernels: returns the attention
    weights :obj:`[E, H]` and the aggregated values :obj:`[N_dst, H, C]`
    (see :func:`torch_geometric_gate.ops.attend` for the arguments).
    """
    e = EdgeScore.apply(
        q_src, q_dst, edge_attr, weight_edge, src, dst, loop,
        att_neighbor, att_self, negative_slope,
    )  # fmt: skip
    if masked is not None:
        e = e.masked_fill(masked.view(-1, 1), float('-inf'))
    alpha = softmax(e, dst, num_nodes=num_dst)
    alpha = F.dropout(alpha, p=dropout, training=training)
    return alpha, EdgeAggregate.apply(value, alpha, src, dst, num_dst)
