r"""The chunked operators' inputs, spelled once: each custom operator's
schema is built from its :class:`~typing.NamedTuple`, and its kernels,
fake implementation and autograd read the inputs by name."""

import inspect
from typing import Callable, List, NamedTuple, Optional, Tuple, Type

import torch
from torch import Tensor


class Inputs(NamedTuple):
    r"""The inputs of ``torch_geometric_gate::chunked_attention``."""

    q_src: Tensor  # [N_src, H, C]
    q_dst: Tensor  # [N_dst, H, C]
    value: Tensor  # [N_src, H, C]
    edge_attr: Optional[Tensor]  # [E, D]
    weight_edge: Optional[Tensor]  # [H * C, D]
    att_neighbor: Tensor  # [1, H, C]
    att_self: Tensor  # [1, H, C]
    src: Tensor  # [E]
    dst: Tensor  # [E]
    # The flags of `types.edge_flags`:
    loop: Optional[Tensor]
    masked: Optional[Tensor]
    loops_masked_before: int
    num_dst: int
    negative_slope: float
    dropout: float
    # Settings of the switch (`switch.KernelSettings`); `chunk` is its
    # `chunk_elements`, 0 for the default (resolved where the kernel runs,
    # by `switch.chunk_size`):
    chunk: int
    loops_max_elements: int


#: The differentiable inputs, in order (those of :class:`Inputs` first).
DIFFERENTIABLE = Inputs._fields[:7]


class Outputs(NamedTuple):
    r"""The outputs of ``torch_geometric_gate::chunked_attention``."""

    alpha: Tensor  # [E, H] after dropout
    out: Tensor  # [N_dst, H, C]
    softmax: Tensor  # [E, H] before dropout, empty without dropout
    edges: Tensor  # [2, E] int32 where the node count allows


class BackwardInputs(NamedTuple):
    r"""The inputs of ``torch_geometric_gate::chunked_attention_backward``:
    the gradients of :class:`Outputs`, what the forward saved, its settings
    and which gradients are needed (of :data:`DIFFERENTIABLE`)."""

    grad_alpha: Optional[Tensor]
    grad_out: Optional[Tensor]
    grad_softmax: Optional[Tensor]
    q_src: Tensor
    q_dst: Tensor
    value: Tensor
    edge_attr: Optional[Tensor]
    weight_edge: Optional[Tensor]
    att_neighbor: Tensor
    att_self: Tensor
    loop: Optional[Tensor]
    alpha: Tensor
    softmax: Tensor
    edges: Tensor
    num_dst: int
    negative_slope: float
    dropout: float
    chunk: int
    loops_max_elements: int
    need: List[bool]


#: What the forward saves for backward (fields of both tuples).
SAVED = (
    'q_src', 'q_dst', 'value', 'edge_attr', 'weight_edge', 'att_neighbor',
    'att_self', 'loop', 'alpha', 'softmax', 'edges',
)  # fmt: skip
#: The forward's settings that backward takes (fields of both tuples).
SETTINGS = ('num_dst', 'negative_slope', 'dropout', 'chunk',
            'loops_max_elements')  # fmt: skip


def custom_op(
    name: str, inputs: Type[NamedTuple], returns, impl: Callable
) -> torch.library.CustomOpDef:
    r"""The custom operator :obj:`name` whose schema is :obj:`inputs`'
    fields (with their annotations) returning :obj:`returns`, running
    :obj:`impl` on an :obj:`inputs` tuple."""

    def op(*args):
        return impl(inputs(*args))

    op.__name__ = name.split('::')[-1]
    op.__signature__ = inspect.Signature(
        [
            inspect.Parameter(
                field,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                annotation=inputs.__annotations__[field],
            )
            for field in inputs._fields
        ],
        return_annotation=returns,
    )
    return torch.library.custom_op(name, op, mutates_args=())


def named(inputs: Type[NamedTuple], fn: Callable) -> Callable:
    r""":obj:`fn` taking an :obj:`inputs` tuple, as a function of the
    operator's positional arguments (its kernels and fake
    implementation)."""

    def kernel(*args):
        return fn(inputs(*args))

    return kernel


ForwardReturns = Tuple[Tensor, Tensor, Tensor, Tensor]
BackwardReturns = List[Tensor]
