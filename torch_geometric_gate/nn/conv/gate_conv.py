import typing
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from torch_geometric import EdgeIndex
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.dense.linear import Linear
from torch_geometric.nn.inits import zeros
from torch_geometric.typing import Adj, OptTensor, PairTensor, SparseTensor
from torch_geometric.utils import (
    is_torch_sparse_tensor,
    scatter,
    softmax,
    to_edge_index,
    to_torch_sparse_tensor,
)

if typing.TYPE_CHECKING:
    from typing import Literal, overload


class GATEConv(MessagePassing):
    r"""The GATE operator from the `"GATE: How to Keep Out Intrusive
    Neighbors" <https://arxiv.org/abs/2406.00418>`_ paper, a
    :class:`~torch_geometric.nn.conv.GATv2Conv` that scores a node's own
    self-loop with an attention vector :math:`\mathbf{a}_t` of its own, next
    to the vector :math:`\mathbf{a}_s` that scores its neighbors. This lets
    every node decide how much to aggregate: the layer can act like an MLP
    layer (:math:`\alpha_{v,v} = 1`), like a GAT layer, or anything between.

    .. math::
        \mathbf{x}^{\prime}_v = \sum_{u \in \mathcal{N}(v) \cup \{ v \}}
        \alpha_{u,v} \mathbf{W} \mathbf{x}_u,

    where the attention coefficients :math:`\alpha_{u,v}` are the softmax,
    over the incoming edges of :math:`v` (self-loop included), of

    .. math::
        e_{u,v} = \left( \mathbb{1}_{u \neq v} \, \mathbf{a}_s +
        \mathbb{1}_{u = v} \, \mathbf{a}_t \right)^{\top}
        \phi\left( \mathbf{U} \mathbf{x}_u + \mathbf{V} \mathbf{x}_v
        \right),

    with :math:`\phi` the ReLU (a LeakyReLU if :obj:`negative_slope > 0`).
    Edge features add :math:`\mathbf{W}_e \mathbf{e}_{u,v}` inside
    :math:`\phi`, as in GATv2. Both attention vectors start at zero (uniform
    attention), as the paper prescribes.

    Unlike GATv2, the values :math:`\mathbf{W}` (:obj:`lin`) are not the
    projections :math:`\mathbf{U}` (:obj:`lin_src`) and :math:`\mathbf{V}`
    (:obj:`lin_dst`) that score the edges, and none of the three has a bias;
    :math:`\mathbf{a}_s` is :obj:`att_neighbor`, :math:`\mathbf{a}_t`
    :obj:`att_self`. The arguments are
    :class:`~torch_geometric.nn.conv.GATv2Conv`'s, in its order; they
    differ in :obj:`negative_slope` (default :obj:`0.0`),
    :obj:`add_self_loops`, :obj:`fill_value` and :obj:`share_weights`.

    With :obj:`add_self_loops=True`, input self-loops get attention
    :obj:`0` and :obj:`min(N_src, N_dst)` self-loops are appended (no shape
    depends on the data). Bipartite source and target :obj:`i` are one node
    only then (PyG's convention); otherwise all edges use
    :math:`\mathbf{a}_s`.

    Args:
        in_channels (int or tuple): Size of each input sample, or :obj:`-1` to
            derive the size from the first input(s) to the forward method.
            A tuple corresponds to the sizes of source and target
            dimensionalities in case of a bipartite graph.
        out_channels (int): Size of each output sample.
        heads (int, optional): Number of multi-head-attentions.
            (default: :obj:`1`)
        concat (bool, optional): If set to :obj:`False`, the multi-head
            attentions are averaged instead of concatenated.
            (default: :obj:`True`)
        negative_slope (float, optional): Negative slope of :math:`\phi`:
            :obj:`0.0` is the paper's ReLU, :obj:`0.2` GATv2's LeakyReLU.
            (default: :obj:`0.0`)
        dropout (float, optional): Dropout probability of the normalized
            attention coefficients. (default: :obj:`0`)
        add_self_loops (bool, optional): If set to :obj:`False`, the graph is
            taken as given: its self-loops are scored with
            :math:`\mathbf{a}_t`. (default: :obj:`True`)
        edge_dim (int, optional): Edge feature dimensionality (in case
            there are any), :obj:`-1` for lazy initialization.
            (default: :obj:`None`)
        fill_value (float or torch.Tensor or str, optional): The way to
            generate edge features of self-loops (in case
            :obj:`edge_dim != None`): a value, or a reduction (:obj:`"add"`,
            :obj:`"mean"`, :obj:`"min"`, :obj:`"max"`, :obj:`"mul"`) of the
            edges the node aggregates, input self-loops excluded (under
            :obj:`flow="target_to_source"` those of row 0, where
            :class:`~torch_geometric.nn.conv.GATv2Conv` reduces over row 1).
            (default: :obj:`"mean"`)
        bias (bool, optional): If set to :obj:`False`, the layer will not learn
            an additive bias. (default: :obj:`True`)
        share_weights (bool, optional): If set to :obj:`True`, one matrix
            :obj:`lin` holds :math:`\mathbf{W} = \mathbf{U} = \mathbf{V}`
            (GATE\ :sub:`S`). (default: :obj:`False`)
        residual (bool, optional): If set to :obj:`True`, the layer will add
            a learnable skip-connection. (default: :obj:`False`)
        **kwargs (optional): Additional arguments of
            :class:`torch_geometric.nn.conv.MessagePassing`.

    Shapes:
        - **input:**
          node features :math:`(|\mathcal{V}|, F_{in})` or
          :math:`((|\mathcal{V}_s|, F_{s}), (|\mathcal{V}_t|, F_{t}))`
          if bipartite,
          edge indices :math:`(2, |\mathcal{E}|)` or a transposed sparse
          adjacency :math:`(|\mathcal{V}_t|, |\mathcal{V}_s|)`,
          edge features :math:`(|\mathcal{E}|, D)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}_t|, H * F_{out})`
          (:math:`F_{out}` if :obj:`concat=False`), and with
          :obj:`return_attention_weights=True` the edges used (self-loops
          appended) and their weights :math:`(|\mathcal{E}^{\prime}|, H)`.

    Example:
        >>> conv = GATEConv(16, 32, heads=4)
        >>> x = torch.randn(100, 16)
        >>> edge_index = torch.randint(0, 100, (2, 500))
        >>> conv(x, edge_index).size()
        torch.Size([100, 128])
        >>> out, (ei, alpha) = conv(x, edge_index,
        ...                         return_attention_weights=True)
        >>> ei.size(), alpha.size()  # 500 edges and 100 self-loops
        (torch.Size([2, 600]), torch.Size([600, 4]))
    """
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
        kwargs.setdefault('aggr', 'add')
        super().__init__(node_dim=0, **kwargs)
        pair = in_channels if isinstance(in_channels, tuple) else None
        src_channels, dst_channels = pair or (in_channels, in_channels)
        if share_weights and src_channels != dst_channels:
            raise ValueError("'share_weights=True' needs as many source as "
                             'target channels')
        if self.decomposed_layers > 1:
            raise ValueError("'decomposed_layers > 1' is not supported")
        # Whether the masked input self-loops may stay among the edges
        # aggregated (a zero message: a sum ignores it, a mean would count
        # it and a max compare it; see _propagate_attention):
        self._sum_aggr = self.aggr in ('add', 'sum')

        self.in_channels = in_channels
        self.out_channels = out_channels
        self.heads = heads
        self.concat = concat
        self.negative_slope = float(negative_slope)
        self.dropout = float(dropout)
        self.add_self_loops = add_self_loops
        self.edge_dim = edge_dim
        if not isinstance(fill_value, (str, Tensor)):
            # A float, as TorchScript takes it (not a NumPy number):
            fill_value = float(fill_value)
        self.fill_value = fill_value
        self.share_weights = share_weights
        self.residual = residual
        self._num_appended_loops = 0  # (explain mode: see explain_message)

        # W (values), U (source side of the score), V (target side):
        self.lin = Linear(src_channels, heads * out_channels, bias=False,
                          weight_initializer='glorot')
        self.lin_src: Optional[Linear] = None
        self.lin_dst: Optional[Linear] = None
        if not share_weights:
            self.lin_src = Linear(src_channels, heads * out_channels,
                                  bias=False, weight_initializer='glorot')
            self.lin_dst = Linear(dst_channels, heads * out_channels,
                                  bias=False, weight_initializer='glorot')

        # a_s (neighbors) and a_t (the node itself):
        self.att_neighbor = Parameter(torch.empty(1, heads, out_channels))
        self.att_self = Parameter(torch.empty(1, heads, out_channels))

        self.lin_edge: Optional[Linear] = None
        if edge_dim is not None:
            self.lin_edge = Linear(edge_dim, heads * out_channels, bias=False,
                                   weight_initializer='glorot')
        total_out_channels = out_channels * (heads if concat else 1)
        self.res: Optional[Linear] = None
        if residual:
            self.res = Linear(dst_channels, total_out_channels, bias=False,
                              weight_initializer='glorot')
        if bias:
            self.bias = Parameter(torch.empty(total_out_channels))
        else:
            self.register_parameter('bias', None)

        self.reset_parameters()

    def reset_parameters(self):
        super().reset_parameters()
        self.lin.reset_parameters()
        if self.lin_src is not None and self.lin_dst is not None:
            self.lin_src.reset_parameters()
            self.lin_dst.reset_parameters()
        if self.lin_edge is not None:
            self.lin_edge.reset_parameters()
        if self.res is not None:
            self.res.reset_parameters()
        zeros(self.att_neighbor)
        zeros(self.att_self)
        zeros(self.bias)

    if typing.TYPE_CHECKING:

        @overload
        def forward(
            self, x: Union[Tensor, PairTensor], edge_index: Adj,
            edge_attr: OptTensor = None,
            return_attention_weights: Optional[Literal[False]] = None
        ) -> Tensor:
            ...

        @overload
        def forward(  # noqa: F811
            self, x: Union[Tensor, PairTensor], edge_index: Tensor,
            edge_attr: OptTensor = None, *,
            return_attention_weights: Literal[True]
        ) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
            ...

        @overload
        def forward(  # noqa: F811
            self, x: Union[Tensor, PairTensor], edge_index: SparseTensor,
            edge_attr: OptTensor = None, *,
            return_attention_weights: Literal[True]
        ) -> Tuple[Tensor, SparseTensor]:
            ...

    def forward(  # noqa: F811
            self, x: Union[Tensor, PairTensor], edge_index: Adj,
            edge_attr: OptTensor = None,
            return_attention_weights: Optional[bool] = None):
        r"""Runs the forward pass of the module.

        Args:
            x (torch.Tensor or (torch.Tensor, torch.Tensor)): The input node
                features, or the source and target node features of a
                bipartite graph.
            edge_index (torch.Tensor or SparseTensor): The edge indices
                :obj:`[2, E]` (source, target), an
                :class:`~torch_geometric.EdgeIndex`, or a transposed sparse
                adjacency matrix.
            edge_attr (torch.Tensor, optional): The edge features
                :obj:`[E, edge_dim]`; with a sparse :obj:`edge_index`, in
                the order of its coalesced entries. (default: :obj:`None`)
            return_attention_weights (bool, optional): If set to
                :obj:`True`, will additionally return the tuple
                :obj:`(edge_index, attention_weights)`: the edges used
                :obj:`[2, E']` (appended self-loops, and masked input
                self-loops with weight :obj:`0`, included; an
                :class:`~torch_geometric.EdgeIndex` for one) and their
                weights :obj:`[E', H]`. For a sparse :obj:`edge_index`, the
                weights come as a sparse matrix of its layout, without the
                masked self-loops. Not under TorchScript.
                (default: :obj:`None`)
        """
        need_weights = False
        if return_attention_weights is not None:
            need_weights = return_attention_weights
        if torch.jit.is_scripting():  # refused before the work
            if need_weights:
                raise ValueError("'return_attention_weights=True' is not "
                                 'supported under TorchScript')
        out, ei, alpha, num_loops = self._forward(x, edge_index, edge_attr,
                                                  need_weights)
        if torch.jit.is_scripting():
            return out
        if not need_weights:
            return out
        assert alpha is not None
        if isinstance(edge_index,
                      Tensor) and not is_torch_sparse_tensor(edge_index):
            if (not torch.jit.is_scripting()
                    and isinstance(edge_index, EdgeIndex)
                    and not isinstance(ei, EdgeIndex)):
                # With the appended loops, as GATv2Conv returns it:
                ei = EdgeIndex(ei, sparse_size=edge_index.sparse_size())
            return out, (ei, alpha)
        if num_loops > 0:  # The sparse forms drop the input loops.
            keep = ~self._loop_flags(ei, num_loops)[1]
            ei, alpha = ei[:, keep], alpha[keep]
        if isinstance(edge_index, SparseTensor):
            return out, SparseTensor(
                row=ei[1], col=ei[0], value=alpha,
                sparse_sizes=(edge_index.size(0), edge_index.size(1)))
        adj = to_torch_sparse_tensor(ei.flip(0), alpha, edge_index.size(),
                                     layout=edge_index.layout)
        adj = adj.coalesce() if adj.layout == torch.sparse_coo else adj
        return out, (adj, adj.values())

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
        r"""The attention step: returns the aggregated values
        :obj:`[N_dst, H, C]` and the attention weights :obj:`[E, H]` of
        the edges :obj:`edge_index`, given the projections :obj:`x = (U
        x_src, V x_dst)` and :obj:`value = W x_src`, by
        :meth:`_propagate_attention`. :obj:`loop` flags the self-loops that
        :math:`\mathbf{a}_t` scores; :obj:`None` under
        :obj:`add_self_loops`: the last :obj:`min(size)` edges are then the
        appended self-loops, and the input's own are masked. A subclass may
        override it with fused kernels; these may return no weights unless
        :obj:`need_weights`, and may read the caller's
        :obj:`input_edge_index` (say, the cached CSR of an
        :class:`~torch_geometric.EdgeIndex`).
        """
        return self._propagate_attention(edge_index, x, value, edge_attr, loop,
                                         size)

    def _propagate_attention(
        self,
        edge_index: Tensor,
        x: PairTensor,
        value: Tensor,
        edge_attr: OptTensor,
        loop: OptTensor,
        size: Tuple[int, int],
    ) -> Tuple[Tensor, Tensor]:
        r"""The attention step by PyG's message passing,
        :meth:`edge_updater` and :meth:`propagate`.
        """
        masked: OptTensor = None
        if loop is None:  # The flags of the appended self-loops:
            loop, masked = self._loop_flags(edge_index, min(size))
        # edge_updater_type: (x: PairTensor, edge_attr: OptTensor, loop: Tensor, masked: OptTensor)  # noqa
        alpha = self.edge_updater(edge_index, x=x, edge_attr=edge_attr,
                                  loop=loop, masked=masked, size=size)
        if masked is None or self._sum_aggr:
            # propagate_type: (x: PairTensor, alpha: Tensor)
            out = self.propagate(edge_index, x=(value, x[1]), alpha=alpha,
                                 size=size)
            return out, alpha
        # Another aggregation: the masked loops to a spare row, cut off.
        pad = value.new_zeros(1, value.size(1), value.size(2))
        if self.flow == 'source_to_target':
            ei = torch.stack(
                [edge_index[0], edge_index[1].masked_fill(masked, size[1])])
            out = self.propagate(ei, x=(value, torch.cat([x[1], pad])),
                                 alpha=alpha, size=(size[0], size[1] + 1))
            return out[:size[1]], alpha
        ei = torch.stack(
            [edge_index[0].masked_fill(masked, size[0]), edge_index[1]])
        out = self.propagate(ei, x=(torch.cat([value, pad]), x[1]),
                             alpha=alpha, size=(size[0] + 1, size[1]))
        return out[:size[0]], alpha

    def _forward(
        self,
        x: Union[Tensor, PairTensor],
        edge_index: Adj,
        edge_attr: OptTensor,
        need_weights: bool,
    ) -> Tuple[Tensor, Tensor, OptTensor, int]:
        H, C = self.heads, self.out_channels
        if isinstance(x, Tensor):
            x_src, x_dst, bipartite = x, x, False
        else:
            x_src, x_dst, bipartite = x[0], x[1], True
        assert x_src.dim() == 2 and x_dst.dim() == 2
        num_src, num_dst = x_src.size(0), x_dst.size(0)

        ei = self._edge_index(edge_index)
        if edge_attr is not None:
            if self.lin_edge is None:
                raise ValueError("'edge_attr' needs a layer with 'edge_dim'")
            if edge_attr.dim() == 1:
                edge_attr = edge_attr.view(-1, 1)

        value, q_src, q_dst = self._project(x_src, x_dst, bipartite)

        num_loops = 0
        loop: OptTensor = None
        if self.add_self_loops:
            # Masks the input's self-loops and appends fresh ones, with shapes
            # that do not depend on the data (their flags follow from these):
            num_loops = min(num_src, num_dst)
            if edge_attr is not None:
                fill_value = self.fill_value
                if isinstance(fill_value, str):  # Input loops to a spare row:
                    dst = ei[int(self.flow == 'source_to_target')]
                    dst = dst.masked_fill(ei[0] == ei[1], num_dst)
                    loop_attr = scatter(edge_attr, dst, 0, num_dst + 1,
                                        fill_value)[:num_loops]
                elif isinstance(fill_value, Tensor):
                    loop_attr = fill_value.to(edge_attr).expand(
                        num_loops, edge_attr.size(1))
                else:
                    loop_attr = edge_attr.new_full(
                        (num_loops, edge_attr.size(1)), float(fill_value))
                edge_attr = torch.cat([edge_attr, loop_attr], dim=0)
            loops = torch.arange(num_loops, device=ei.device)
            ei = torch.cat([ei, loops.repeat(2, 1)], dim=1)
        else:  # Then no edge of a bipartite graph is a self-loop:
            loop = (torch.zeros_like(ei[0], dtype=torch.bool)
                    if bipartite else ei[0] == ei[1])

        if not torch.jit.is_scripting():
            # The self-loops an explainer's edge mask does not cover:
            self._num_appended_loops = num_loops
        out, alpha = self._attention(ei, (q_src, q_dst), value, edge_attr,
                                     loop, (num_src, num_dst), need_weights,
                                     edge_index)
        out = out.reshape(-1, H * C) if self.concat else out.mean(dim=1)
        if self.res is not None:
            out = out + self.res(x_dst)
        if self.bias is not None:
            out = out + self.bias
        return out, ei, alpha, num_loops

    def _loop_flags(self, edge_index: Tensor,
                    num_loops: int) -> Tuple[Tensor, Tensor]:
        # The edges a_t scores and those masked, where the last `num_loops`
        # edges are the appended self-loops: the input's own are masked.
        num_input = edge_index.size(1) - num_loops
        input_loop = edge_index[0, :num_input] == edge_index[1, :num_input]
        loop = torch.cat([input_loop, input_loop.new_ones(num_loops)])
        masked = torch.cat([input_loop, input_loop.new_zeros(num_loops)])
        return loop, masked

    def _project(self, x_src: Tensor, x_dst: Tensor,
                 bipartite: bool) -> Tuple[Tensor, Tensor, Tensor]:
        # W x_src, U x_src and V x_dst, each [N, H, C].
        H, C = self.heads, self.out_channels
        value = self.lin(x_src).view(-1, H, C)
        if self.lin_src is None or self.lin_dst is None:  # share_weights
            q_dst = self.lin(x_dst).view(-1, H, C) if bipartite else value
            return value, value, q_dst
        return (value, self.lin_src(x_src).view(-1, H, C),
                self.lin_dst(x_dst).view(-1, H, C))

    def edge_update(self, x_j: Tensor, x_i: Tensor, edge_attr: OptTensor,
                    loop: Tensor, masked: OptTensor, index: Tensor,
                    ptr: OptTensor, dim_size: Optional[int]) -> Tensor:
        z = x_j + x_i
        if edge_attr is not None and self.lin_edge is not None:
            z = z + self.lin_edge(edge_attr).view(-1, self.heads,
                                                  self.out_channels)
        z = F.leaky_relu(z, self.negative_slope)
        att = torch.where(loop.view(-1, 1, 1), self.att_self,
                          self.att_neighbor)
        e = (z * att).sum(dim=-1)
        if masked is not None:
            e = e.masked_fill(masked.view(-1, 1), float('-inf'))
        alpha = softmax(e, index, ptr, dim_size)
        return F.dropout(alpha, p=self.dropout, training=self.training)

    def message(self, x_j: Tensor, alpha: Tensor) -> Tensor:
        return x_j * alpha.unsqueeze(-1)

    def explain_message(self, inputs: Tensor,
                        dim_size: Optional[int]) -> Tensor:
        # A mask entry per input edge; the appended self-loops get ones:
        edge_mask = self._edge_mask
        if edge_mask is None:
            raise ValueError("Could not find a pre-defined 'edge_mask' "
                             'to explain. Did you forget to initialize it?')
        if self._apply_sigmoid:
            edge_mask = edge_mask.sigmoid()
        loops = self._num_appended_loops
        num_edges = inputs.size(self.node_dim) - loops
        if edge_mask.size(0) != num_edges:
            raise ValueError(f"The explainer's edge mask has "
                             f'{edge_mask.size(0)} entries for {num_edges} '
                             f'edges')
        edge_mask = torch.cat([edge_mask, edge_mask.new_ones(loops)])
        return inputs * edge_mask.view([-1] + [1] * (inputs.dim() - 1))

    def _edge_index(self, edge_index: Adj) -> Tensor:
        # The [2, E] (source, target) edge index of any adjacency:
        if isinstance(edge_index, SparseTensor):
            col, row, _ = edge_index.coo()  # `adj_t`: row = target.
            return torch.stack([row, col], dim=0)
        if is_torch_sparse_tensor(edge_index):
            if edge_index.layout == torch.sparse_coo:
                edge_index = edge_index.coalesce()
            ei = to_edge_index(edge_index)[0]
            if edge_index.layout == torch.sparse_csc:  # To row-major order:
                ei = ei[:, torch.argsort(ei[0], stable=True)]
            return ei.flip(0)
        # As PyG's message passing checks it (the cast below would hide it):
        if (edge_index.is_floating_point() or edge_index.is_complex()
                or edge_index.dtype == torch.bool):
            raise ValueError("Expected 'edge_index' to be of integer type "
                             f"(got '{edge_index.dtype}')")
        return edge_index.long()

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.in_channels}, '
                f'{self.out_channels}, heads={self.heads})')
