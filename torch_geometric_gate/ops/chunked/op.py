r"""The chunked kernels: GATE's attention without any :obj:`[E, H, C]`
tensor saved for backward.

Autograd saves the :obj:`[E, H, C]` edge tensors of the reference path (the
gathered projections, the activation :math:`\phi(\mathbf{U} \mathbf{x}_u +
\mathbf{V} \mathbf{x}_v)`, the gathered messages) for backward. The kernels
below save only node tensors, the edge index (as :obj:`int32` where the
node count allows), the :obj:`[E]` self-loop flags (none under the
layer's :obj:`add_self_loops`: they are derived from the edges again, see
:func:`~torch_geometric_gate.ops.types.edge_flags`), the :obj:`[E, H]`
attention weights and, with dropout, the softmax before dropout (backward
reads the dropout mask back from the weights), and recompute every
:obj:`[E, H, C]` tensor in backward, chunk by chunk over the edges, so that
none is ever held whole. The softmax and the messages are summed in float32
(or wider) whatever the dtype of the projections.

:func:`chunked_attention` runs the whole attention (scores, masking,
softmax, dropout, aggregation) as one autograd node, in two forms that
share every computation:

* eagerly, a :class:`torch.autograd.Function` whose backward is itself made
  of differentiable ATen operations (double backward, gradient penalties;
  not :mod:`torch.func` transforms, under which the switch runs the
  reference and a forced kernel raises); on CPU tensors it runs the loops
  that Inductor compiles from the same computation
  (:mod:`~torch_geometric_gate.ops.chunked.loops`) where they apply,
  forward and first-order backward;
* under :func:`torch.compile`, the :mod:`torch.library` custom operator
  ``torch_geometric_gate::chunked_attention`` (with a fake implementation
  and autograd), whose backward is the custom operator
  ``torch_geometric_gate::chunked_attention_backward``: the compiler
  traces both as single opaque nodes (no graph break, no chunk loop
  unrolled into the graph). On CPU tensors the operators run the same
  computation compiled by Inductor
  (:mod:`~torch_geometric_gate.ops.chunked.loops`): fused loops instead
  of chunks of ATen operations, the same saved tensors. A custom
  operator's backward cannot be differentiated again (nor can
  :func:`torch.compile`'s backward).
"""

from typing import Optional, Tuple

import torch
from torch import Tensor

from torch_geometric_gate.ops.chunked import aten, loops
from torch_geometric_gate.ops.chunked.schema import (
    DIFFERENTIABLE,
    SAVED,
    SETTINGS,
    BackwardInputs,
    BackwardReturns,
    ForwardReturns,
    Inputs,
    Outputs,
    custom_op,
    named,
)
from torch_geometric_gate.ops.switch import KernelSettings
from torch_geometric_gate.ops.types import (
    AttentionGraph,
    AttentionInputs,
    AttentionParams,
)

# The operators, their CPU kernels (the compiled loops), fake
# implementations and autograd -----------------------------------------------

_attention_op = custom_op(
    'torch_geometric_gate::chunked_attention', Inputs, ForwardReturns,
    aten.forward,
)  # fmt: skip
_attention_backward_op = custom_op(
    'torch_geometric_gate::chunked_attention_backward', BackwardInputs,
    BackwardReturns, aten.backward,
)  # fmt: skip
_attention_op.register_kernel('cpu')(named(Inputs, loops.cpu_attention))
_attention_backward_op.register_kernel('cpu')(
    named(BackwardInputs, loops.cpu_attention_backward)
)


@_attention_op.register_fake
def _(*args):
    i = Inputs(*args)
    num_edges, heads = i.src.size(0), i.att_neighbor.size(1)
    dtype = torch.promote_types(i.q_src.dtype, i.att_neighbor.dtype)
    alpha = i.q_src.new_empty(num_edges, heads, dtype=dtype)
    out_dtype = torch.promote_types(i.value.dtype, dtype)
    out = i.value.new_empty(i.num_dst, heads, i.value.size(2), dtype=out_dtype)
    drop = i.dropout > 0.0
    softmax = alpha.new_empty(num_edges if drop else 0, heads)
    index_dtype = aten.index_dtype(i.q_src.size(0), i.num_dst)
    edges = i.src.new_empty(2, num_edges, dtype=index_dtype)
    return Outputs(alpha, out, softmax, edges)


@_attention_backward_op.register_fake
def _(*args):
    i = BackwardInputs(*args)
    inputs = [getattr(i, name) for name in DIFFERENTIABLE]
    # Contiguous, as the kernels return them (`aten.needed_grads`), whatever
    # the inputs' strides (`empty_like` keeps a permuted input's):
    return [
        t.new_empty(t.shape)
        for t, n in zip(inputs, i.need)
        if n and t is not None
    ]


def _setup_context(ctx, inputs, output):
    i, o = Inputs(*inputs), Outputs(*output)
    ctx.mark_non_differentiable(o.edges)
    ctx.set_materialize_grads(False)
    saved = {**i._asdict(), **o._asdict()}
    ctx.save_for_backward(*(saved[name] for name in SAVED))
    ctx.settings = {name: saved[name] for name in SETTINGS}


def _gradients(ctx, grads, backward, needs_input_grad):
    r"""Runs :obj:`backward` (:func:`aten.backward` or its custom operator,
    on positional arguments) on what :func:`_setup_context` saved and the
    gradients of :class:`Outputs`; returns a gradient per input."""
    saved = dict(zip(SAVED, ctx.saved_tensors))
    need = [
        bool(n) and saved[name] is not None
        for n, name in zip(needs_input_grad, DIFFERENTIABLE)
    ]
    grads = Outputs(*grads)
    i = BackwardInputs(
        grad_alpha=grads.alpha, grad_out=grads.out,
        grad_softmax=grads.softmax, need=need, **saved, **ctx.settings,
    )  # fmt: skip
    result = iter(backward(*i))
    return tuple(next(result) if n else None for n in need) + (None,) * (
        len(Inputs._fields) - len(DIFFERENTIABLE)
    )


def _op_backward(ctx, *grads):
    backward = torch.ops.torch_geometric_gate.chunked_attention_backward
    return _gradients(ctx, grads, backward, ctx.needs_input_grad)


_attention_op.register_autograd(_op_backward, setup_context=_setup_context)


class _ChunkedAttention(torch.autograd.Function):
    # The eager form: on CPU tensors the compiled loops where they apply
    # (and the settings allow); its backward is differentiable (it runs the
    # chunks then).
    @staticmethod
    def forward(eager_loops: bool, *inputs):
        return loops.eager_forward(Inputs(*inputs), eager_loops)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.eager_loops = inputs[0]
        _setup_context(ctx, inputs[1:], output)

    @staticmethod
    def backward(ctx, *grads):
        eager_loops = ctx.eager_loops

        def backward(*args):
            return loops.eager_backward(BackwardInputs(*args), eager_loops)

        needs = ctx.needs_input_grad[1:]
        return (None,) + _gradients(ctx, grads, backward, needs)


def chunked_attention(
    graph: AttentionGraph,
    params: AttentionParams,
    inputs: AttentionInputs,
    settings: KernelSettings,
) -> Tuple[Tensor, Optional[Tensor]]:
    r"""GATE's attention with the chunked kernels: returns the aggregated
    values :obj:`[N_dst, H, C]` and the attention weights :obj:`[E, H]`
    (after dropout; returned whatever :obj:`params.need_weights` says, as
    the kernel computes them anyway).

    Eagerly it runs a :class:`torch.autograd.Function` (differentiable
    backward); under :func:`torch.compile` the custom operator
    ``torch_geometric_gate::chunked_attention`` (no graph break).
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
    for name, rows in (
        ('q_src', graph.num_src),
        ('q_dst', graph.num_dst),
        ('value', graph.num_src),
    ):
        t = getattr(inputs, name)
        if t.dim() != 3 or t.shape != (rows, heads, channels):
            raise ValueError(
                f"Expected '{name}' of shape [{rows}, {heads}, {channels}] "
                f'(got {list(t.shape)})'
            )
    i = Inputs(
        q_src=inputs.q_src, q_dst=inputs.q_dst, value=inputs.value,
        edge_attr=inputs.edge_attr, weight_edge=params.weight_edge,
        att_neighbor=params.att_neighbor, att_self=params.att_self,
        src=graph.src, dst=graph.dst, loop=graph.loop, masked=graph.masked,
        loops_masked_before=graph.loops_masked_before,
        num_dst=graph.num_dst, negative_slope=float(params.negative_slope),
        dropout=float(params.dropout) if params.training else 0.0,
        chunk=settings.chunk_elements or 0,
        loops_max_elements=settings.loops_max_elements,
    )  # fmt: skip
    if torch.compiler.is_compiling():
        o = Outputs(*torch.ops.torch_geometric_gate.chunked_attention(*i))
    else:
        o = Outputs(*_ChunkedAttention.apply(settings.eager_loops, *i))
    return o.out, o.alpha
