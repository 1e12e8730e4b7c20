r""":class:`GATEConv` with its attention step on the memory-lean kernels of
:mod:`torch_geometric_gate.ops`, as PyG's
:class:`~torch_geometric.nn.conv.FusedGATConv` is
:class:`~torch_geometric.nn.conv.GATConv` on dgNN's fused kernel.

The layer (:mod:`torch_geometric_gate.nn.conv.gate_conv`, the file PyG
merges) defines one overridable step, :meth:`GATEConv.attention`; the class
here (:class:`KernelGATEConv`, exported as
:class:`torch_geometric_gate.GATEConv`) overrides it alone, with one call
to the kernels, and has the same parameters (checkpoints load into either
class) and the same outputs. It has a class name of its own: PyG's
:class:`~torch_geometric.inspector.Inspector` reads the base's type
comments by class name. Under TorchScript its step is the base's message
passing (:meth:`propagate_attention`).
"""

from typing import List, Tuple

import torch
from torch import Tensor
from torch.nn.parameter import UninitializedParameter
from torch_geometric import EdgeIndex
from torch_geometric.typing import Adj, OptTensor, PairTensor

from torch_geometric_gate.nn.conv import gate_conv
from torch_geometric_gate.ops import (
    AttentionGraph,
    AttentionInputs,
    AttentionParams,
)
from torch_geometric_gate.ops.dispatch import attend

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


class KernelGATEConv(gate_conv.GATEConv):
    __doc__ = gate_conv.GATEConv.__doc__

    def __repr__(self) -> str:
        # Imported and documented as GATEConv; printed so too:
        return (
            f'GATEConv({self.in_channels}, {self.out_channels}, '
            f'heads={self.heads})'
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
            lin_edge = self.lin_edge
            graph = AttentionGraph(
                src=edge_index[0],
                dst=edge_index[1],
                # Under add_self_loops the flags follow from the edges (the
                # kernels derive them where they read the edges; compiled,
                # the base's flag tensors are then never computed):
                loop=None if self.add_self_loops else loop,
                masked=None if self.add_self_loops else masked,
                num_src=size[0],
                num_dst=size[1],
                num_loops=min(size) if self.add_self_loops else 0,
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
                weight_edge=None if lin_edge is None else lin_edge.weight,
                negative_slope=self.negative_slope,
                dropout=self.dropout,
                training=self.training,
                need_weights=need_weights,
            )
            inputs = AttentionInputs(x[0], x[1], value, edge_attr)
            result = attend(graph, params, inputs, self._reference_only())
            if result is not None:
                return result
        return self.propagate_attention(
            edge_index, x, value, edge_attr, loop, masked, size
        )

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


#: The layer, with its attention on the kernels.
GATEConv = KernelGATEConv
