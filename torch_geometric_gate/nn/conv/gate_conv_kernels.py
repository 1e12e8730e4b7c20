r""":class:`GATEConv` with its attention step on the memory-lean kernels of
:mod:`torch_geometric_gate.ops`, as PyG's
:class:`~torch_geometric.nn.conv.FusedGATConv` is
:class:`~torch_geometric.nn.conv.GATConv` on dgNN's fused kernel.

The layer (:mod:`torch_geometric_gate.nn.conv.gate_conv`, the file PyG
merges) defines one overridable step, :meth:`GATEConv.attention`; this
class overrides it alone, and has the same parameters (checkpoints load
into either class) and the same outputs.
"""

import types
from typing import Callable, List, Tuple

import torch
from torch import Tensor
from torch.nn.parameter import UninitializedParameter
from torch_geometric import EdgeIndex
from torch_geometric.inspector import Inspector
from torch_geometric.typing import Adj, OptTensor, PairTensor

from torch_geometric_gate.nn.conv import gate_conv
from torch_geometric_gate.ops.dispatch import _run_kernel, _select_kernel
from torch_geometric_gate.ops.types import AttentionGraph, AttentionParams

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


def _call_types(method: str) -> dict:
    # The base's `# {method}_type:` comments, as PyG's Inspector reads them:
    params = Inspector(gate_conv.GATEConv).get_params_from_method_call(
        method, exclude=[0, 'edge_index', 'size']
    )
    return {name: param.type for name, param in params.items()}


def _renamed(fn: Callable, name: str) -> Callable:
    # TorchScript compiles a method under its function's `__name__`:
    out = types.FunctionType(
        fn.__code__, fn.__globals__, name, fn.__defaults__, fn.__closure__
    )
    out.__annotations__ = fn.__annotations__
    return out


class GATEConv(gate_conv.GATEConv):
    __doc__ = gate_conv.GATEConv.__doc__

    # PyG's Inspector caches class sources by class name, which this class
    # shares with its base: it would not find the base's type comments, so
    # they are given here as attributes (what TorchScript and PyG's
    # generated `propagate` need):
    propagate_type = _call_types('propagate')
    edge_updater_type = _call_types('edge_updater')

    # The step as PyG ships it under another name, the reference that
    # TorchScript compiles (it has no `super()`):
    _reference_attention = _renamed(
        gate_conv.GATEConv.attention, '_reference_attention'
    )

    def attention(
        self,
        edge_index: Tensor,
        x: PairTensor,
        value: Tensor,
        edge_attr: OptTensor,
        loop: Tensor,
        masked: OptTensor,
        size: Tuple[int, int],
        need_weights: bool,
        input_edge_index: Adj,
    ) -> Tuple[Tensor, OptTensor]:
        r"""The attention step on the kernel that
        :func:`~torch_geometric_gate.attention_kernel` selects (see there),
        else by PyG's message passing."""
        if not torch.jit.is_scripting():
            kernel = _select_kernel(
                value, self._reference_only(), edge_index.size(1)
            )
            if kernel != 'reference':
                return self._kernel_attention(
                    kernel, edge_index, x, value, edge_attr, loop, masked,
                    size, need_weights, input_edge_index,
                )  # fmt: skip
        return self._reference_attention(
            edge_index, x, value, edge_attr, loop, masked, size,
            need_weights, input_edge_index,
        )  # fmt: skip

    def _kernel_attention(
        self,
        kernel: str,
        edge_index: Tensor,
        x: PairTensor,
        value: Tensor,
        edge_attr: OptTensor,
        loop: Tensor,
        masked: OptTensor,
        size: Tuple[int, int],
        need_weights: bool,
        input_edge_index: Adj,
    ) -> Tuple[Tensor, OptTensor]:
        num_loops = min(size) if self.add_self_loops else 0
        lin_edge = self.lin_edge
        graph = AttentionGraph(
            src=edge_index[0],
            dst=edge_index[1],
            # Under add_self_loops the flags follow from the edges (the
            # kernels derive them where they read the edges; compiled, the
            # base's flag tensors are then never computed):
            loop=None if self.add_self_loops else loop,
            masked=None if self.add_self_loops else masked,
            num_src=size[0],
            num_dst=size[1],
            num_loops=num_loops,
            edge_index=(
                input_edge_index
                if isinstance(input_edge_index, EdgeIndex)
                else None
            ),
            mask_input_loops=self.add_self_loops,
        )
        params = AttentionParams(
            att_neighbor=self.att_neighbor,
            att_self=self.att_self,
            weight_edge=lin_edge if lin_edge is None else lin_edge.weight,
            negative_slope=self.negative_slope,
            dropout=self.dropout,
            training=self.training,
            need_weights=need_weights,
        )
        alpha, out = _run_kernel(
            kernel, graph, params, x[0], x[1], value, edge_attr
        )
        return out, alpha

    def _reference_only(self) -> List[str]:
        # What only the layer knows: why this call must run the reference.
        why = []
        if self.explain:
            why.append('the layer is in explain mode')
        if any(len(getattr(self, name)) > 0 for name in _HOOKS):
            why.append('message-passing hooks are registered')
        if self.aggr not in ('add', 'sum'):
            why.append(f"aggr='{self.aggr}' is not a sum")
        if self.flow != 'source_to_target':
            why.append(f"flow='{self.flow}'")
        if self.decomposed_layers > 1:
            why.append('decomposed_layers > 1')
        if self.negative_slope < 0:
            why.append('negative_slope < 0')
        if self.lin_edge is not None and isinstance(
            self.lin_edge.weight, UninitializedParameter
        ):
            why.append("the lazy 'edge_dim' is not initialized yet")
        return why
