r""":class:`GATEConv` with its attention step on the memory-lean kernels of
:mod:`torch_geometric_gate.ops`, as PyG's
:class:`~torch_geometric.nn.conv.FusedGATConv` is
:class:`~torch_geometric.nn.conv.GATConv` on dgNN's fused kernel.

The layer (:mod:`torch_geometric_gate.nn.conv.gate_conv`, the file PyG
merges) defines one overridable step, :meth:`GATEConv._attention`; the class
here (:class:`KernelGATEConv`, exported as
:class:`torch_geometric_gate.GATEConv`) overrides it, with one call to
the kernels, computes the three projections as one product where its
modules allow (:meth:`_project`), wraps the entry points with the
package's checks (below), adds two (:meth:`forward_with_attention`, the
weights also under TorchScript, and :meth:`forward_with_self_attention`),
and has the same parameters (checkpoints load into either class) and the
same outputs. It has a class name of its own: PyG's
:class:`~torch_geometric.inspector.Inspector` reads the base's type
comments by class name. Under TorchScript its step is the base's message
passing (:meth:`_propagate_attention`).

The upstream file checks what PyG's
:class:`~torch_geometric.nn.conv.GATv2Conv` checks, plus what the layer
needs to be correct. The class here adds the package's checks, with
messages that name the problem and the expected form (see
:mod:`torch_geometric_gate.utils._validation`): of the arguments in
:meth:`__init__`, before the layer is built, and of the inputs first in
:meth:`forward`, :meth:`forward_with_attention` and
:meth:`forward_with_self_attention`, which then run the base's.
TorchScript has no :obj:`super()`: there the Python branch (:obj:`if not
torch.jit.is_scripting()`, which TorchScript does not compile) is skipped,
and the scripted methods call the base's :meth:`_forward` as the base's own
do, with the upstream file's checks only.
(:meth:`__prepare_scriptable__`, swapping in a base-class layer, would
replace the layer in the caller's eager model too.)
"""

from typing import List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.parameter import UninitializedParameter
from torch_geometric import EdgeIndex
from torch_geometric.nn.dense.linear import Linear
from torch_geometric.typing import Adj, OptTensor, PairTensor

from torch_geometric_gate.nn.conv import gate_conv
from torch_geometric_gate.ops import (
    AttentionGraph,
    AttentionInputs,
    AttentionParams,
    current_settings,
    projection_product,
)
from torch_geometric_gate.ops.dispatch import attend
from torch_geometric_gate.utils import self_loop_attention
from torch_geometric_gate.utils._validation import (
    check_conv_arguments,
    check_conv_inputs,
)

# MessagePassing's hook dictionaries (the module's own forward hooks wrap the
# whole call, and run the same with every kernel):
_HOOKS = tuple(
    f'_{stage}_forward{pre}_hooks'
    for stage in (
        'propagate',
        'message',
        'aggregate',
        'message_and_aggregate',
        'edge_update',
    )
    for pre in ('_pre', '')
)


class _LoopWeights:
    r"""The :obj:`need_weights` that :meth:`KernelGATEConv.
    forward_with_self_attention` passes through the base's :meth:`_forward`
    to :meth:`_attention` (which takes it as it comes): the weights of the
    appended self-loops alone (:attr:`~torch_geometric_gate.ops.
    AttentionParams.loop_weights_only`). True, as weights are needed, for
    the base's code, and the upstream file unchanged."""

    def __bool__(self) -> bool:
        return True


_LOOP_WEIGHTS = _LoopWeights()


def plain_linear_problem(module: torch.nn.Module) -> Optional[str]:
    r"""Why a kernel may not read :obj:`module.weight` in the place of
    calling :obj:`module`, or :obj:`None` where it may: where the module
    computes :obj:`x @ module.weight.T` and nothing else, PyG's
    :class:`~torch_geometric.nn.dense.Linear` itself (not a subclass or a
    parametrized one), initialized, without a bias, its weight a parameter,
    and no hook of its own or global, forward or backward (pruning and
    :func:`torch.nn.utils.weight_norm` are forward pre-hooks)."""
    from torch.nn.modules import module as nn_module

    hooks = (
        module._forward_hooks, module._forward_pre_hooks,
        module._backward_hooks, module._backward_pre_hooks,
        nn_module._global_forward_hooks,
        nn_module._global_forward_pre_hooks,
        nn_module._global_backward_hooks,
        nn_module._global_backward_pre_hooks,
    )  # fmt: skip
    if type(module) is not Linear:
        return f"is a {type(module).__name__}, not PyG's Linear"
    if isinstance(module.weight, UninitializedParameter):
        return 'is not initialized yet (lazy, before its first call)'
    if module.bias is not None:
        return 'has a bias'
    if not isinstance(module.weight, torch.nn.Parameter):
        return (
            'has a weight that is not a parameter (as under '
            'torch.func.functional_call)'
        )
    if any(hooks):
        return 'has hooks (forward or backward, its own or global)'
    return None


def is_plain_linear(module: torch.nn.Module) -> bool:
    r"""Whether a kernel may read :obj:`module.weight` in the place of
    calling :obj:`module` (:func:`plain_linear_problem` says why not)."""
    return plain_linear_problem(module) is None


class KernelGATEConv(gate_conv.GATEConv):
    __doc__ = gate_conv.GATEConv.__doc__

    def __init__(
        self,
        in_channels: Union[int, Tuple[int, int]],
        out_channels: int,
        heads: int = 1,
        concat: bool = True,
        negative_slope: float = 0.0,
        dropout: float = 0.0,
        add_self_loops: bool = True,
        edge_dim: Optional[int] = None,
        fill_value: Union[float, Tensor, str] = 'mean',
        bias: bool = True,
        share_weights: bool = False,
        residual: bool = False,
        **kwargs,
    ):
        in_channels, out_channels, heads, edge_dim = check_conv_arguments(
            in_channels,
            out_channels,
            heads,
            negative_slope,
            dropout,
            edge_dim,
            fill_value,
        )
        super().__init__(
            in_channels,
            out_channels,
            heads=heads,
            concat=concat,
            negative_slope=negative_slope,
            dropout=dropout,
            add_self_loops=add_self_loops,
            edge_dim=edge_dim,
            fill_value=fill_value,
            bias=bias,
            share_weights=share_weights,
            residual=residual,
            **kwargs,
        )

    def forward(
        self,
        x: Union[Tensor, PairTensor],
        edge_index: Adj,
        edge_attr: OptTensor = None,
        return_attention_weights: Optional[bool] = None,
    ):
        if not torch.jit.is_scripting():
            check_conv_inputs(self, x, edge_index, edge_attr)
            return super().forward(
                x, edge_index, edge_attr, return_attention_weights
            )
        # TorchScript (no super()): the base's scripted forward.
        if return_attention_weights is not None and return_attention_weights:
            raise ValueError(
                "'return_attention_weights=True' is not supported under "
                'TorchScript (use forward_with_attention)'
            )
        return self._forward(x, edge_index, edge_attr, False)[0]

    forward.__doc__ = gate_conv.GATEConv.forward.__doc__

    @torch.jit.export
    def forward_with_attention(
        self,
        x: Union[Tensor, PairTensor],
        edge_index: Adj,
        edge_attr: OptTensor = None,
    ) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
        r"""Runs the forward pass and returns, with the output, the attention
        weights of :obj:`return_attention_weights=True` in their dense form
        for any adjacency, also under TorchScript: the edges used
        :obj:`[2, E']` (masked input self-loops included, with weight
        :obj:`0`; an :class:`~torch_geometric.EdgeIndex` of the input's
        sparse size for one) and their weights :obj:`[E', H]`.
        """
        if not torch.jit.is_scripting():
            check_conv_inputs(self, x, edge_index, edge_attr)
        out, ei, alpha, _ = self._forward(x, edge_index, edge_attr, True)
        assert alpha is not None
        if not torch.jit.is_scripting():
            if isinstance(edge_index, EdgeIndex) and not isinstance(
                ei, EdgeIndex
            ):
                # With the appended loops, as forward returns it (its
                # targets size self_loop_attention's result):
                ei = EdgeIndex(ei, sparse_size=edge_index.sparse_size())
        return out, (ei, alpha)

    @torch.jit.export
    def forward_with_self_attention(
        self,
        x: Union[Tensor, PairTensor],
        edge_index: Adj,
        edge_attr: OptTensor = None,
    ) -> Tuple[Tensor, Tensor]:
        r"""Runs the forward pass and returns, with the output, the
        self-attention :math:`\alpha_{v,v}` of every target node
        :obj:`[N_dst, H]`: what
        :func:`~torch_geometric_gate.utils.self_loop_attention` gives from
        :meth:`forward_with_attention`'s weights (after attention dropout,
        if any, in training mode), also under TorchScript.

        With :obj:`add_self_loops=True` the Triton kernels compute these
        weights alone (:obj:`N x H` written instead of :obj:`E x H`); the
        other kernels compute all weights and keep the self-loops'.
        :math:`\alpha_{v,v} = 0` for a target node
        :math:`v \geq N_{src}` of a bipartite input, which has no self-loop,
        and for every target node of a bipartite input without
        :obj:`add_self_loops`, where no edge is a self-loop (all are scored
        with :math:`\mathbf{a}_s`).
        """
        if not torch.jit.is_scripting():
            check_conv_inputs(self, x, edge_index, edge_attr)
            if self.add_self_loops:
                return self._forward_with_loop_weights(
                    x, edge_index, edge_attr
                )
        out, ei, alpha, _ = self._forward(x, edge_index, edge_attr, True)
        assert alpha is not None
        if not self.add_self_loops and not isinstance(x, Tensor):
            # Bipartite: source i and target i are two nodes, not a loop.
            return out, alpha.new_zeros(out.size(0), alpha.size(1))
        return out, self_loop_attention(ei, alpha, out.size(0))

    @torch.jit.unused
    def _forward_with_loop_weights(
        self, x: Union[Tensor, PairTensor], edge_index: Adj, edge_attr
    ) -> Tuple[Tensor, Tensor]:
        # The appended self-loops' weights alone (the last `num_loops`
        # rows, row v the loop (v, v); a kernel may return those alone):
        out, _, alpha, num_loops = self._forward(
            x, edge_index, edge_attr, _LOOP_WEIGHTS
        )
        alpha = alpha[alpha.size(0) - num_loops :]
        # No self-loop for the targets v >= N_src of a bipartite input:
        rest = alpha.new_zeros(out.size(0) - num_loops, alpha.size(1))
        return out, torch.cat([alpha, rest])

    def _project(
        self, x_src: Tensor, x_dst: Tensor, bipartite: bool
    ) -> Tuple[Tensor, Tensor, Tensor]:
        # W x_src, U x_src and V x_dst as the views of one product
        # [N, 3, H, C] (x read once, one operator in the backward; the
        # kernels read the views in place and differentiate the product),
        # where it computes what the three modules would.
        H, C = self.heads, self.out_channels
        if not torch.jit.is_scripting() and self._fusable(bipartite):
            weight = torch.cat(
                [self.lin.weight, self.lin_src.weight, self.lin_dst.weight]
            )
            parts = F.linear(x_src, weight).view(-1, 3, H, C).unbind(1)
            return parts[0], parts[1], parts[2]
        if not torch.jit.is_scripting():
            return super()._project(x_src, x_dst, bipartite)
        # TorchScript (no super()): the base's, by the modules.
        value = self.lin(x_src).view(-1, H, C)
        if self.lin_src is None or self.lin_dst is None:  # share_weights
            q_dst = self.lin(x_dst).view(-1, H, C) if bipartite else value
            return value, value, q_dst
        q_src, q_dst = self.lin_src(x_src), self.lin_dst(x_dst)
        return value, q_src.view(-1, H, C), q_dst.view(-1, H, C)

    @torch.jit.unused
    def _fusable(self, bipartite: bool) -> bool:
        # (Not with the reference forced: then the upstream layer's
        # computation, the three modules, bit for bit.)
        lins = (self.lin, self.lin_src, self.lin_dst)
        return (
            not bipartite
            and current_settings().kernel != 'reference'
            and all(m is not None and is_plain_linear(m) for m in lins)
            and all(m.in_channels > 0 for m in lins)  # not lazy any more
        )

    def __repr__(self) -> str:
        # Imported and documented as GATEConv; printed so too:
        return (
            f'GATEConv({self.in_channels}, {self.out_channels}, '
            f'heads={self.heads})'
        )

    def _attention(
        self,
        edge_index: Tensor,
        x: PairTensor,
        value: Tensor,
        edge_attr: OptTensor,
        loop: OptTensor,
        size: Tuple[int, int],
        need_weights: bool,
        input_edge_index: Adj,
    ) -> Tuple[Tensor, OptTensor]:
        r"""The attention step on the kernel that
        :func:`~torch_geometric_gate.attention_kernel` selects (see there),
        else by PyG's message passing."""
        if not torch.jit.is_scripting():
            lin_edge = self.lin_edge
            # The step's contract: loop None when the last min(size) edges
            # are the appended self-loops; the kernels then derive the flags
            # where they read the edges.
            appended = loop is None
            if isinstance(edge_index, EdgeIndex):  # The input's, no loops
                edge_index = edge_index.as_tensor()  # appended: plain rows.
            src, dst = edge_index.unbind(0)
            graph = AttentionGraph(
                src=src,
                dst=dst,
                loop=loop,
                masked=None,
                num_src=size[0],
                num_dst=size[1],
                num_loops=min(size) if appended else 0,
                edge_index=(
                    input_edge_index
                    if isinstance(input_edge_index, EdgeIndex)
                    else None
                ),
                mask_input_loops=appended,
            )
            params = AttentionParams(
                att_neighbor=self.att_neighbor,
                att_self=self.att_self,
                weight_edge=None if lin_edge is None else lin_edge.weight,
                negative_slope=self.negative_slope,
                dropout=self.dropout,
                training=self.training,
                # (`is` first: torch 2.11's Dynamo cannot trace `bool()`
                # of an object with a `__bool__`, a graph break.)
                need_weights=(
                    need_weights is _LOOP_WEIGHTS or bool(need_weights)
                ),
                loop_weights_only=need_weights is _LOOP_WEIGHTS and appended,
            )
            # The layer's views of its one projection product (nothing
            # else sees them): a kernel may differentiate the product.
            product = projection_product(x[0], x[1], value)
            inputs = AttentionInputs(x[0], x[1], value, edge_attr, product)
            result = attend(graph, params, inputs, self._reference_only())
            if result is not None:
                return result
        return self._propagate_attention(
            edge_index, x, value, edge_attr, loop, size
        )

    def _reference_only(self) -> List[str]:
        # What only the layer knows: why this call must run the reference.
        why = []
        if self.explain:
            why.append('the layer is in explain mode')
        if any(len(getattr(self, name)) > 0 for name in _HOOKS):
            why.append('message-passing hooks are registered')
        lazy = self.lin_edge is not None and isinstance(
            self.lin_edge.weight, UninitializedParameter
        )
        if lazy:
            why.append("the lazy 'edge_dim' is not initialized yet")
        problem = (
            None
            if self.lin_edge is None or lazy
            else plain_linear_problem(self.lin_edge)
        )
        if problem is not None:  # The kernels read its weight alone.
            why.append(
                f"'lin_edge' {problem}: the kernels would read its weight "
                f'alone'
            )
        if self.aggr not in ('add', 'sum'):
            why.append(f"aggr='{self.aggr}' is not a sum")
        if self.flow != 'source_to_target':
            why.append(f"flow='{self.flow}'")
        if self.decomposed_layers > 1:
            why.append('decomposed_layers > 1')
        if self.negative_slope < 0:
            why.append('negative_slope < 0')
        return why


#: The layer, with its attention on the kernels.
GATEConv = KernelGATEConv
