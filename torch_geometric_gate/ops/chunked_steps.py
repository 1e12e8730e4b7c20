r"""The two steps of the chunked kernels, the scores and the aggregation,
as autograd functions of their own (:class:`EdgeScore`,
:class:`EdgeAggregate`), with the softmax and dropout left to the caller.
The Triton kernels' double backward differentiates them; the layer runs
the fused :func:`~torch_geometric_gate.ops.chunked.chunked_attention`.
"""

from typing import Optional

import torch
from torch import Tensor

from torch_geometric_gate.ops.chunked import (
    _aggregate,
    _aggregate_backward,
    _score_backward,
    _scores,
)


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
    ) -> Tensor:
        att = torch.cat([att_neighbor, att_self], dim=0)  # [2, H, C]
        return _scores(
            q_src, q_dst, edge_attr, weight_edge, src, dst, loop, att,
            negative_slope,
        )  # fmt: skip

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
        need = ctx.needs_input_grad
        grads = _score_backward(
            grad_e, q_src, q_dst, edge_attr, weight_edge, src, dst, loop,
            att, ctx.negative_slope,
            [need[0], need[1], need[2], need[3], need[7] or need[8]],
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
    ) -> Tensor:
        return _aggregate(x, alpha, src, dst, num_dst)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, alpha, src, dst, _ = inputs
        ctx.save_for_backward(x, alpha, src, dst)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        x, alpha, src, dst = ctx.saved_tensors
        need = ctx.needs_input_grad
        grad_x, grad_alpha = _aggregate_backward(
            grad_out, x, alpha, src, dst, need[0], need[1]
        )
        return grad_x, grad_alpha, None, None, None
