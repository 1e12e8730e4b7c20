import numbers
import typing
from typing import List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter
from torch.utils.checkpoint import checkpoint
from torch_geometric import is_compiling
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.dense.linear import (
    Linear,
    is_uninitialized_parameter,
)
from torch_geometric.nn.inits import zeros
from torch_geometric.typing import (
    Adj,
    OptTensor,
    PairTensor,
    SparseTensor,
)
from torch_geometric.utils import (
    coalesce,
    is_torch_sparse_tensor,
    scatter,
    softmax,
    to_edge_index,
    to_torch_sparse_tensor,
)

from torch_geometric_gate.nn.conv._fused import (
    fused_aggregate,
    fused_attention,
)

if typing.TYPE_CHECKING:  # pragma: no cover
    from typing import Literal, overload


_FILL_REDUCTIONS = ('add', 'sum', 'mean', 'min', 'max', 'mul')


class GATEConv(MessagePassing):
    r"""The GATE operator from the `"GATE: How to Keep Out Intrusive
    Neighbors" <https://arxiv.org/abs/2406.00418>`_ paper (ICML 2024).

    GATE is a :class:`~torch_geometric.nn.conv.GATv2Conv` that scores a
    node's own self-loop with an attention vector :math:`\mathbf{a}_t` of its
    own, next to the vector :math:`\mathbf{a}_s` that scores its neighbors.
    This lets every node decide how much to aggregate: the layer can act
    like an MLP layer (:math:`\alpha_{v,v} = 1`), like a GAT layer, or
    anything in between.

    .. math::
        \mathbf{x}^{\prime}_v = \sum_{u \in \mathcal{N}(v) \cup \{ v \}}
        \alpha_{u,v} \mathbf{W} \mathbf{x}_u \; (+ \mathbf{b}),

    where the attention coefficients :math:`\alpha_{u,v}` are the softmax,
    over the incoming edges of :math:`v` (self-loop included), of

    .. math::
        e_{u,v} = \left( \mathbb{1}_{u \neq v} \, \mathbf{a}_s +
        \mathbb{1}_{u = v} \, \mathbf{a}_t \right)^{\top}
        \phi\left( \mathbf{U} \mathbf{x}_u + \mathbf{V} \mathbf{x}_v
        \right),

    with :math:`\phi` the ReLU (or a LeakyReLU if
    :obj:`negative_slope > 0`).
    If the graph has multi-dimensional edge features :math:`\mathbf{e}_{u,v}`,
    they enter the score as in :class:`~torch_geometric.nn.conv.GATv2Conv`:
    :math:`\phi(\mathbf{U} \mathbf{x}_u + \mathbf{V} \mathbf{x}_v +
    \mathbf{W}_e \mathbf{e}_{u,v})`.
    With :obj:`share_weights=True` the layer is GATE\ :sub:`S`,
    :math:`\mathbf{W} = \mathbf{U} = \mathbf{V}`.

    The self-attention :math:`\alpha_{v,v}` tells how much a node ignores its
    neighbors (:math:`1`: only its own features, :math:`0`: only its
    neighbors'). Read it with
    :func:`~torch_geometric_gate.utils.self_loop_attention` from the output of
    :obj:`return_attention_weights=True`.

    Both attention vectors start at zero (uniform attention over each node's
    neighbors and itself), as the paper prescribes. :obj:`W`, :obj:`U` and
    :obj:`V` carry no bias of their own; the optional bias is added to the
    output.

    .. note::
        With :obj:`add_self_loops=True`, self-loops that the input graph
        already holds are kept in place but masked out of the softmax (their
        attention is exactly :obj:`0`), and one fresh self-loop per node is
        appended after the input edges. This keeps every tensor shape
        independent of the data, so the layer compiles with
        :obj:`torch.compile(..., fullgraph=True)` without graph breaks.
        The :obj:`edge_index` returned with the attention weights therefore
        has :obj:`E + min(N_src, N_dst)` columns: the input edges, then the
        appended loops.

    .. note::
        Under TorchScript, :meth:`forward` returns the output only. Use
        :meth:`forward_with_attention` in scripted code to obtain the
        attention weights.

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
        negative_slope (float, optional): Negative slope of :math:`\phi`.
            :obj:`0.0` is the ReLU of the paper, with which the signs of
            :math:`\mathbf{a}_s` and :math:`\mathbf{a}_t` read as "for" or
            "against" aggregation; :obj:`0.2` gives GATv2's LeakyReLU.
            (default: :obj:`0.0`)
        dropout (float, optional): Dropout probability of the normalized
            attention coefficients. (default: :obj:`0`)
        add_self_loops (bool, optional): If set to :obj:`True`, every node
            ends with exactly one self-loop, scored with :math:`\mathbf{a}_t`,
            whatever loops the input had. If set to :obj:`False`, the graph is
            taken as given: loops present are scored with
            :math:`\mathbf{a}_t`, and a node without one has no
            self-attention. (default: :obj:`True`)
        share_weights (bool, optional): If set to :obj:`True`, the same matrix
            is used for the values and for both sides of the score,
            :math:`\mathbf{W} = \mathbf{U} = \mathbf{V}` (GATE\ :sub:`S`).
            (default: :obj:`False`)
        bias (bool, optional): If set to :obj:`False`, the layer will not learn
            an additive bias. (default: :obj:`True`)
        edge_dim (int, optional): Edge feature dimensionality (in case
            there are any), or :obj:`-1` to derive it from the first
            :obj:`edge_attr` given to the forward method. (default:
            :obj:`None`)
        residual (bool, optional): If set to :obj:`True`, the layer will add
            a learnable skip-connection. (default: :obj:`False`)
        fill_value (float or torch.Tensor or str, optional): The way to
            generate edge features of self-loops
            (in case :obj:`edge_dim != None`), as in
            :class:`~torch_geometric.nn.conv.GATv2Conv`: a :obj:`float` or
            :class:`torch.Tensor` is used as it is; a :obj:`str`
            (:obj:`"add"`, :obj:`"mean"`, :obj:`"min"`, :obj:`"max"`,
            :obj:`"mul"`) aggregates the features of the edges that point to
            the node (input self-loops excluded). (default: :obj:`"mean"`)
        **kwargs (optional): Additional arguments of
            :class:`torch_geometric.nn.conv.MessagePassing`.

    Shapes:
        - **input:**
          node features :math:`(|\mathcal{V}|, F_{in})` or
          :math:`((|\mathcal{V_s}|, F_{s}), (|\mathcal{V_t}|, F_{t}))`
          if bipartite,
          edge indices :math:`(2, |\mathcal{E}|)` or a sparse adjacency
          matrix :math:`(|\mathcal{V}_t|, |\mathcal{V}_s|)`,
          edge features :math:`(|\mathcal{E}|, D)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, H * F_{out})` or
          :math:`(|\mathcal{V}_t|, H * F_{out})` if bipartite
          (:math:`F_{out}` if :obj:`concat=False`).
          If :obj:`return_attention_weights=True`, then
          :math:`((|\mathcal{V}_t|, H * F_{out}),
          ((2, |\mathcal{E}^{\prime}|), (|\mathcal{E}^{\prime}|, H)))`,
          where :math:`\mathcal{E}^{\prime}` holds the edges actually used,
          self-loops included.

    Example:
        >>> import torch
        >>> from torch_geometric_gate import GATEConv
        >>> from torch_geometric_gate.utils import self_loop_attention
        >>> x = torch.randn(4, 8)
        >>> edge_index = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
        >>> conv = GATEConv(8, 16, heads=2)
        >>> out, (ei, alpha) = conv(x, edge_index,
        ...                         return_attention_weights=True)
        >>> out.shape, ei.shape, alpha.shape
        (torch.Size([4, 32]), torch.Size([2, 8]), torch.Size([8, 2]))
        >>> self_loop_attention(ei, alpha.detach())  # zero attention: uniform
        tensor([[0.5000, 0.5000],
                [0.5000, 0.5000],
                [0.5000, 0.5000],
                [0.5000, 0.5000]])
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
        share_weights: bool = False,
        bias: bool = True,
        edge_dim: Optional[int] = None,
        residual: bool = False,
        fill_value: Union[float, Tensor, str] = 'mean',
        **kwargs,
    ):
        kwargs.setdefault('aggr', 'add')
        super().__init__(node_dim=0, **kwargs)

        src_channels, dst_channels = _check_in_channels(in_channels)
        _check_positive_int(out_channels, 'out_channels')
        _check_positive_int(heads, 'heads')
        # numbers.Real admits NumPy scalars (np.float32 is no float):
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real):
            raise TypeError(
                f"'dropout' must be a float in [0, 1) "
                f'(got {type(dropout).__name__})'
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"'dropout' must be in [0, 1) (got {dropout})")
        if edge_dim is not None and edge_dim != -1:
            _check_positive_int(edge_dim, 'edge_dim', lazy=True)
        if share_weights and src_channels != dst_channels:
            raise ValueError(
                f"'share_weights=True' applies one matrix to source and "
                f'target nodes, so both need the same number of input '
                f'channels (got {in_channels})'
            )
        if isinstance(fill_value, str):
            if fill_value not in _FILL_REDUCTIONS:
                raise ValueError(
                    f"'fill_value' must be a number, a tensor or one of "
                    f"{_FILL_REDUCTIONS} (got '{fill_value}')"
                )
        elif isinstance(fill_value, bool) or not isinstance(
            fill_value, (numbers.Real, Tensor)
        ):
            raise TypeError(
                f"'fill_value' must be a number, a tensor or a "
                f'string (got {type(fill_value).__name__})'
            )

        self.in_channels = in_channels
        self.out_channels = out_channels
        self.heads = heads
        self.concat = concat
        self.negative_slope = float(negative_slope)
        self.dropout = float(dropout)
        self.add_self_loops = add_self_loops
        self.share_weights = share_weights
        self.edge_dim = edge_dim
        self.residual = residual
        if isinstance(fill_value, numbers.Real):
            fill_value = float(fill_value)
        self.fill_value = fill_value

        # W (values), U (source side of the score), V (target side):
        self.lin = Linear(
            src_channels,
            heads * out_channels,
            bias=False,
            weight_initializer='glorot',
        )
        if share_weights:
            self.lin_src = self.lin
            self.lin_dst = self.lin
        else:
            self.lin_src = Linear(
                src_channels,
                heads * out_channels,
                bias=False,
                weight_initializer='glorot',
            )
            self.lin_dst = Linear(
                dst_channels,
                heads * out_channels,
                bias=False,
                weight_initializer='glorot',
            )

        # a_s (neighbors) and a_t (the node itself):
        self.att_neighbor = Parameter(torch.empty(1, heads, out_channels))
        self.att_self = Parameter(torch.empty(1, heads, out_channels))

        if edge_dim is not None:
            self.lin_edge = Linear(
                edge_dim,
                heads * out_channels,
                bias=False,
                weight_initializer='glorot',
            )
        else:
            self.lin_edge = None

        total_out_channels = out_channels * (heads if concat else 1)

        if residual:
            self.res = Linear(
                dst_channels,
                total_out_channels,
                bias=False,
                weight_initializer='glorot',
            )
        else:
            self.register_parameter('res', None)

        if bias:
            self.bias = Parameter(torch.empty(total_out_channels))
        else:
            self.register_parameter('bias', None)

        self.reset_parameters()

    def reset_parameters(self):
        r"""Resets all learnable parameters of the module: glorot weights,
        zero attention vectors (uniform attention) and zero bias.
        """
        super().reset_parameters()
        self.lin.reset_parameters()
        if not self.share_weights:
            self.lin_src.reset_parameters()
            self.lin_dst.reset_parameters()
        if self.lin_edge is not None:
            self.lin_edge.reset_parameters()
        if self.res is not None:
            self.res.reset_parameters()
        zeros(self.att_neighbor)
        zeros(self.att_self)
        zeros(self.bias)

    if typing.TYPE_CHECKING:  # pragma: no cover

        @overload
        def forward(
            self,
            x: Union[Tensor, PairTensor],
            edge_index: Adj,
            edge_attr: OptTensor = None,
            return_attention_weights: Optional[Literal[False]] = None,
        ) -> Tensor:
            pass

        @overload
        def forward(  # noqa: F811
            self,
            x: Union[Tensor, PairTensor],
            edge_index: Tensor,
            edge_attr: OptTensor = None,
            *,
            return_attention_weights: Literal[True],
        ) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
            pass

        @overload
        def forward(  # noqa: F811
            self,
            x: Union[Tensor, PairTensor],
            edge_index: SparseTensor,
            edge_attr: OptTensor = None,
            *,
            return_attention_weights: Literal[True],
        ) -> Tuple[Tensor, SparseTensor]:
            pass

    def forward(  # noqa: F811
        self,
        x: Union[Tensor, PairTensor],
        edge_index: Adj,
        edge_attr: OptTensor = None,
        return_attention_weights: Optional[bool] = None,
    ):
        r"""Runs the forward pass of the module.

        Args:
            x (torch.Tensor or (torch.Tensor, torch.Tensor)): The input node
                features, or a :obj:`(source, target)` pair of them.
            edge_index (torch.Tensor or SparseTensor): The edge indices
                :obj:`[2, num_edges]` (source to target), a transposed
                :class:`torch.sparse` adjacency matrix (COO, CSR or CSC), or
                a transposed :class:`torch_sparse.SparseTensor`.
            edge_attr (torch.Tensor, optional): The edge features, in the
                order of :obj:`edge_index`. For sparse input, in the order
                of its coalesced entries in every layout: sorted by target
                (row), then by source (column), the order of
                :obj:`adj_t.to_sparse_coo().coalesce()`. This is the storage
                order of CSR and of a coalesced COO tensor, but not of CSC;
                duplicate entries of an uncoalesced COO tensor are one edge.
                (default: :obj:`None`)
            return_attention_weights (bool, optional): If set to
                :obj:`True`, additionally returns the tuple
                :obj:`(edge_index, attention_weights)` of the edges actually
                used (self-loops included), like
                :class:`~torch_geometric.nn.conv.GATv2Conv`; with
                :obj:`None` or :obj:`False`, only the output. For sparse
                input, the weights come back in the same sparse form.
                :obj:`True` is not available under TorchScript: use
                :meth:`forward_with_attention` there. (default: :obj:`None`)
        """
        out, ei, alpha, drop_mask = self._attend(x, edge_index, edge_attr)

        if torch.jit.is_scripting():
            if return_attention_weights is not None and (
                return_attention_weights
            ):
                raise RuntimeError(
                    "'return_attention_weights=True' is not supported under "
                    "TorchScript; call 'forward_with_attention' instead"
                )
            return out

        if not return_attention_weights:  # As GATv2Conv since PyG 2.8.
            return out

        # The sparse form leaves out the masked input self-loops:
        if drop_mask is not None and (
            isinstance(edge_index, SparseTensor)
            or is_torch_sparse_tensor(edge_index)
        ):
            ei, alpha = ei[:, ~drop_mask], alpha[~drop_mask]
        if isinstance(edge_index, SparseTensor):
            num_src, num_dst = edge_index.size(1), edge_index.size(0)
            adj = SparseTensor(
                row=ei[1],
                col=ei[0],
                value=alpha,
                sparse_sizes=(num_dst, num_src),
            )
            return out, adj
        if is_torch_sparse_tensor(edge_index):
            num_src, num_dst = edge_index.size(1), edge_index.size(0)
            adj = to_torch_sparse_tensor(
                ei.flip(0),
                alpha,
                size=(num_dst, num_src),
                layout=edge_index.layout,
            )
            if adj.layout == torch.sparse_coo:
                adj = adj.coalesce()
            return out, (adj, adj.values())
        return out, (ei, alpha)

    @torch.jit.export
    def forward_with_attention(
        self,
        x: Union[Tensor, PairTensor],
        edge_index: Adj,
        edge_attr: OptTensor = None,
    ) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
        r"""Runs the forward pass and returns the output together with the
        tuple :obj:`(edge_index, attention_weights)` of the edges actually
        used (self-loops included), as a :obj:`[2, num_edges]` edge index and
        a :obj:`[num_edges, heads]` tensor, whatever the form of the input
        adjacency.

        The scriptable counterpart of :obj:`return_attention_weights=True`:
        it works the same in eager mode and under :func:`torch.jit.script`.
        """
        out, ei, alpha, _ = self._attend(x, edge_index, edge_attr)
        return out, (ei, alpha)

    def _attend(
        self,
        x: Union[Tensor, PairTensor],
        edge_index: Adj,
        edge_attr: OptTensor,
    ) -> Tuple[Tensor, Tensor, Tensor, OptTensor]:
        r"""Returns the output, the edge index used, the attention weights
        and, with :obj:`add_self_loops=True`, the mask of the masked input
        self-loops.
        """
        H, C = self.heads, self.out_channels

        if isinstance(x, Tensor):
            x_src = x_dst = x
            bipartite = False
        else:
            x_src, x_dst = x[0], x[1]
            bipartite = True
        self._check_features(x_src, x_dst)
        num_src, num_dst = x_src.size(0), x_dst.size(0)

        ei = self._to_edge_index(edge_index, num_src, num_dst)
        edge_attr = self._check_edge_attr(edge_attr, ei.size(1))

        res: OptTensor = None
        if self.res is not None:
            res = self.res(x_dst)

        value = self.lin(x_src).view(-1, H, C)
        if self.share_weights:
            q_src = value
            q_dst = self.lin(x_dst).view(-1, H, C) if bipartite else value
        else:
            q_src = self.lin_src(x_src).view(-1, H, C)
            q_dst = self.lin_dst(x_dst).view(-1, H, C)

        drop_mask: OptTensor = None
        if self.add_self_loops:
            ei, edge_attr, self_mask, drop_mask = self._add_loops(
                ei, edge_attr, min(num_src, num_dst), num_dst
            )
        else:
            self_mask = ei[0] == ei[1]

        # The eager kernels of `_fused` where they apply; the plain message
        # passing under TorchScript, torch.compile, hooks and explain mode:
        fusable = not torch.jit.is_scripting() and self._fusable()
        if fusable and not is_compiling():
            alpha, out = self._fused_attend(
                ei, q_src, q_dst, value, edge_attr, self_mask, drop_mask
            )
        else:
            # edge_updater_type: (q: PairTensor, edge_attr: OptTensor, self_mask: Tensor, drop_mask: OptTensor)  # noqa: E501
            alpha = self.edge_updater(
                ei,
                q=(q_src, q_dst),
                edge_attr=edge_attr,
                self_mask=self_mask,
                drop_mask=drop_mask,
                size=(num_src, num_dst),
            )
            if fusable:  # torch.compile, no hooks: recompute the messages.
                out = self._aggregate_recomputed(
                    ei, value, alpha, num_src, num_dst
                )
            else:
                out = self._aggregate_plain(ei, value, alpha, num_src, num_dst)

        if self.concat:
            out = out.view(-1, H * C)
        else:
            out = out.mean(dim=1)

        if res is not None:
            out = out + res

        if self.bias is not None:
            out = out + self.bias

        return out, ei, alpha, drop_mask

    def edge_update(
        self,
        q_j: Tensor,
        q_i: Tensor,
        edge_attr: OptTensor,
        self_mask: Tensor,
        drop_mask: OptTensor,
        index: Tensor,
        ptr: OptTensor,
        dim_size: Optional[int],
    ) -> Tensor:
        z = q_j + q_i
        if edge_attr is not None:
            assert self.lin_edge is not None
            z = z + self.lin_edge(edge_attr).view(
                -1, self.heads, self.out_channels
            )
        if self.negative_slope == 0.0:
            z = F.relu(z)
        else:
            z = F.leaky_relu(z, self.negative_slope)

        # Each edge reads a_s or a_t from the row of its target node in
        # `[a_s] * N_dst + [a_t] * N_dst`, and every head is scored on its
        # own (one overflowing head leaves the others finite). Reading them
        # per target, rather than broadcasting one vector to all edges, makes
        # their gradients a scatter into `[2 * N_dst, H, C]` and a sum over
        # nodes: compiled, a reduction over all E edges of gathered operands
        # runs one pass over the edges per 8 channels (measured 4.9-8.0x
        # slower on Tolokers; `benchmark/compile_parts.py`). Inductor fuses the
        # gathers, the activation, the choice and the reduction into one
        # forward kernel that writes no `[E, H, C]` activation; eager mode
        # takes `_fused_attend` instead.
        assert dim_size is not None
        rows = torch.cat(
            [
                self.att_neighbor.expand(dim_size, -1, -1),
                self.att_self.expand(dim_size, -1, -1),
            ],
            dim=0,
        )
        att = rows[index + dim_size * self_mask.to(index.dtype)]
        e = (z * att).sum(dim=-1)
        return self._normalize(e, drop_mask, index, ptr, dim_size)

    def _normalize(
        self,
        e: Tensor,
        drop_mask: OptTensor,
        index: Tensor,
        ptr: OptTensor,
        dim_size: Optional[int],
    ) -> Tensor:
        if drop_mask is not None:
            e = e.masked_fill(drop_mask.view(-1, 1), float('-inf'))

        # Under autocast the scoring matmul runs in low precision, while
        # GATv2Conv's elementwise score promotes to the attention vector's
        # dtype. Do the same, so that the softmax and the returned weights
        # are in that dtype:
        e = e.to(torch.promote_types(e.dtype, self.att_self.dtype))
        alpha = softmax(e, index, ptr, dim_size)
        alpha = F.dropout(alpha, p=self.dropout, training=self.training)
        return alpha

    def _aggregate_plain(
        self,
        ei: Tensor,
        value: Tensor,
        alpha: Tensor,
        num_src: int,
        num_dst: int,
    ) -> Tensor:
        # propagate_type: (x: Tensor, alpha: Tensor)
        return self.propagate(
            ei, x=value, alpha=alpha, size=(num_src, num_dst)
        )

    @torch.jit.unused
    def _aggregate_recomputed(
        self,
        ei: Tensor,
        value: Tensor,
        alpha: Tensor,
        num_src: int,
        num_dst: int,
    ) -> Tensor:
        r"""The weighted aggregation under :func:`torch.compile`, as
        :meth:`propagate` under activation checkpointing: the partitioner
        would otherwise save the gathered messages, an :obj:`[E, H, C]`
        tensor, for backward; backward gathers them again instead.
        """
        return checkpoint(
            self._aggregate_plain,
            ei,
            value,
            alpha,
            num_src,
            num_dst,
            use_reentrant=False,
        )

    def message(self, x_j: Tensor, alpha: Tensor) -> Tensor:
        return x_j * alpha.unsqueeze(-1)

    def explain_message(
        self, inputs: Tensor, size_i: Optional[int], size_j: Optional[int]
    ) -> Tensor:
        r"""Applies the edge mask of PyG's explainers to the messages.

        PyG assumes that a layer replaces the input self-loops by
        :obj:`N` new ones. This layer keeps every input edge in place (input
        self-loops masked out of the softmax, so they carry nothing) and,
        with :obj:`add_self_loops=True`, appends :obj:`min(N_src, N_dst)`
        loops: the mask of the input edges applies as it is, and the
        appended loops are not masked.
        """
        edge_mask = self._edge_mask
        if edge_mask is None:
            raise ValueError(
                "Could not find a pre-defined 'edge_mask' to explain. "
                'Did you forget to initialize it?'
            )
        if self._apply_sigmoid:
            edge_mask = edge_mask.sigmoid()
        num_loops = 0
        if self.add_self_loops:
            assert size_i is not None and size_j is not None
            num_loops = min(size_i, size_j)
        if inputs.size(self.node_dim) != edge_mask.size(0) + num_loops:
            raise ValueError(
                f"The explainer's edge mask has {edge_mask.size(0)} "
                f'entries, but the layer was called with '
                f'{inputs.size(self.node_dim) - num_loops} edges'
            )
        if num_loops > 0:
            edge_mask = torch.cat([edge_mask, edge_mask.new_ones(num_loops)])
        size = [1] * inputs.dim()
        size[self.node_dim] = -1
        return inputs * edge_mask.view(size)

    @torch.jit.unused
    def _fusable(self) -> bool:
        r"""Whether eager mode may bypass :meth:`propagate` for the
        memory-lean kernels of :mod:`._fused`, and :func:`torch.compile`
        recompute the aggregation in backward: not while explaining, with
        hooks (a recomputation would run them twice), another aggregation
        or flow, or decomposed layers.
        """
        hooks = (
            self._propagate_forward_pre_hooks,
            self._propagate_forward_hooks,
            self._message_forward_pre_hooks,
            self._message_forward_hooks,
            self._aggregate_forward_pre_hooks,
            self._aggregate_forward_hooks,
            self._message_and_aggregate_forward_pre_hooks,
            self._message_and_aggregate_forward_hooks,
            self._edge_update_forward_pre_hooks,
            self._edge_update_forward_hooks,
        )
        return (
            not self.explain
            and self.decomposed_layers == 1
            and self.aggr in ('add', 'sum')
            and self.flow == 'source_to_target'
            # The fused backward reads the activation's side of 0 from its
            # output, which a negative slope does not keep:
            and self.negative_slope >= 0.0
            and not any(len(h) > 0 for h in hooks)
        )

    @torch.jit.unused
    def _fused_attend(
        self,
        ei: Tensor,
        q_src: Tensor,
        q_dst: Tensor,
        value: Tensor,
        edge_attr: OptTensor,
        self_mask: Tensor,
        drop_mask: OptTensor,
    ) -> Tuple[Tensor, Tensor]:
        r"""The eager counterpart of :meth:`edge_updater` and
        :meth:`propagate`, equal to them up to float rounding: it saves no
        :obj:`[E, H, C]` tensor for backward and recomputes them chunk by
        chunk instead (see :mod:`torch_geometric_gate.nn.conv._fused`).
        Returns the attention weights and the :obj:`[N_dst, H, C]` output.
        """
        num_dst = q_dst.size(0)
        weight_edge: OptTensor = None
        if edge_attr is not None:
            assert self.lin_edge is not None
            if is_uninitialized_parameter(self.lin_edge.weight):
                self.lin_edge(edge_attr)  # Lazy initialization.
            weight_edge = self.lin_edge.weight
        e = fused_attention(
            q_src,
            q_dst,
            edge_attr,
            weight_edge,
            ei,
            self_mask,
            self.att_neighbor,
            self.att_self,
            self.negative_slope,
        )
        alpha = self._normalize(e, drop_mask, ei[1], None, num_dst)
        return alpha, fused_aggregate(value, alpha, ei, num_dst)

    # Helpers #################################################################

    def _check_features(self, x_src: Tensor, x_dst: Tensor):
        if x_src.dim() != 2 or x_dst.dim() != 2:
            raise ValueError(
                f'Expected node features of shape [num_nodes, channels] '
                f'(got {x_src.dim()} and {x_dst.dim()} dimensions)'
            )
        if not torch.is_floating_point(x_src) or not torch.is_floating_point(
            x_dst
        ):
            raise TypeError(
                f'Expected floating-point node features (got '
                f"'{x_src.dtype}' and '{x_dst.dtype}')"
            )
        in_channels = self.in_channels
        if isinstance(in_channels, int):
            src_channels, dst_channels = in_channels, in_channels
        else:
            src_channels, dst_channels = in_channels[0], in_channels[1]
        if src_channels > 0 and x_src.size(-1) != src_channels:
            raise ValueError(
                f'Expected source node features with {src_channels} '
                f"channels ('in_channels') (got {x_src.size(-1)})"
            )
        if dst_channels > 0 and x_dst.size(-1) != dst_channels:
            raise ValueError(
                f'Expected target node features with {dst_channels} '
                f"channels ('in_channels') (got {x_dst.size(-1)})"
            )

    def _to_edge_index(
        self, edge_index: Adj, num_src: int, num_dst: int
    ) -> Tensor:
        r"""Returns a checked :obj:`[2, E]` long edge index (source, target)
        for any supported adjacency form.
        """
        if isinstance(edge_index, SparseTensor):
            _check_sparse_size(
                edge_index.size(0), edge_index.size(1), num_src, num_dst
            )
            col, row, _ = edge_index.coo()  # `adj_t`: row = target.
            return torch.stack([row, col], dim=0)

        if not isinstance(edge_index, Tensor):
            raise TypeError(
                "Expected 'edge_index' to be a torch.Tensor, a "
                'torch.sparse tensor or a SparseTensor'
            )

        if is_torch_sparse_tensor(edge_index):
            _check_sparse_size(
                edge_index.size(0), edge_index.size(1), num_src, num_dst
            )
            return _sparse_to_edge_index(edge_index, num_src, num_dst)

        if (
            torch.is_floating_point(edge_index)
            or edge_index.dtype == torch.bool
            or torch.is_complex(edge_index)
        ):
            raise TypeError(
                f"Expected 'edge_index' of an integer dtype "
                f"(got '{edge_index.dtype}')"
            )
        if edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise ValueError(
                f"Expected 'edge_index' of shape [2, num_edges] "
                f'(got {list(edge_index.size())})'
            )
        edge_index = edge_index.long()
        if not is_compiling() and edge_index.numel() > 0:
            # Skipped under torch.compile, so that the graph has no
            # data-dependent control flow.
            _check_index_range(edge_index, num_src, num_dst)
        return edge_index

    def _check_edge_attr(
        self, edge_attr: OptTensor, num_edges: int
    ) -> OptTensor:
        if edge_attr is None:
            return None
        if self.edge_dim is None:
            raise ValueError(
                "'edge_attr' was given, but the layer was built "
                "without 'edge_dim'; pass 'edge_dim' to "
                'GATEConv to use edge features'
            )
        if edge_attr.dim() == 1:
            edge_attr = edge_attr.view(-1, 1)
        edge_dim = self.edge_dim
        if edge_dim == -1 and self.lin_edge is not None:  # Lazy:
            edge_dim = self.lin_edge.in_channels
        if (
            edge_attr.dim() != 2
            or edge_attr.size(0) != num_edges
            or (edge_dim != -1 and edge_attr.size(1) != edge_dim)
        ):
            raise ValueError(
                f"Expected 'edge_attr' of shape [{num_edges}, {edge_dim}]"
                f' (num_edges, edge_dim) (got {list(edge_attr.size())})'
            )
        return edge_attr

    def _add_loops(
        self,
        edge_index: Tensor,
        edge_attr: OptTensor,
        num_loops: int,
        num_dst: int,
    ) -> Tuple[Tensor, OptTensor, Tensor, Tensor]:
        r"""Appends one self-loop per node and masks the input's own loops,
        with shapes that do not depend on the data. Returns the new edge
        index and edge features, the self-loop mask (scored with
        :math:`\mathbf{a}_t`) and the mask of the input loops to drop.
        """
        input_loop = edge_index[0] == edge_index[1]
        loop = torch.arange(num_loops, device=edge_index.device)
        if edge_attr is not None:
            loop_attr = self._loop_attr(
                edge_attr, edge_index[1], input_loop, num_loops, num_dst
            )
            edge_attr = torch.cat([edge_attr, loop_attr], dim=0)
        edge_index = torch.cat(
            [edge_index, loop.view(1, -1).repeat(2, 1)], dim=1
        )
        self_mask = torch.cat(
            [input_loop, input_loop.new_ones(num_loops)], dim=0
        )
        drop_mask = torch.cat(
            [input_loop, input_loop.new_zeros(num_loops)], dim=0
        )
        return edge_index, edge_attr, self_mask, drop_mask

    def _loop_attr(
        self,
        edge_attr: Tensor,
        dst: Tensor,
        input_loop: Tensor,
        num_loops: int,
        num_dst: int,
    ) -> Tensor:
        fill_value = self.fill_value
        if isinstance(fill_value, str):
            keep = (~input_loop).view(-1, 1)
            count = scatter(keep.to(edge_attr.dtype), dst, 0, num_dst, 'sum')
            if fill_value in ('add', 'sum', 'mean'):
                out = scatter(edge_attr * keep, dst, 0, num_dst, 'sum')
                if fill_value == 'mean':
                    out = out / count.clamp(min=1.0)
            else:
                neutral = 1.0
                if fill_value == 'min':
                    neutral = float('inf')
                elif fill_value == 'max':
                    neutral = float('-inf')
                out = scatter(
                    edge_attr.masked_fill(~keep, neutral),
                    dst,
                    0,
                    num_dst,
                    fill_value,
                )
                out = out.masked_fill(count == 0, 0.0)
            return out[:num_loops]
        if isinstance(fill_value, Tensor):
            loop_attr = fill_value.to(edge_attr.device, edge_attr.dtype)
            return loop_attr.view(1, -1).expand(num_loops, edge_attr.size(1))
        return edge_attr.new_full(
            (num_loops, edge_attr.size(1)), float(fill_value)
        )

    def __repr__(self) -> str:
        return (
            f'{self.__class__.__name__}({self.in_channels}, '
            f'{self.out_channels}, heads={self.heads})'
        )


def _check_positive_int(value, name: str, lazy: bool = False):
    kind = 'a positive int'
    if lazy:
        kind += ', or -1 for lazy initialization,'
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"'{name}' must be {kind} (got {type(value).__name__})"
        )
    if value < 1:
        raise ValueError(f"'{name}' must be {kind} (got {value})")


def _check_in_channels(in_channels) -> Tuple[int, int]:
    pair = (
        (in_channels, in_channels)
        if not isinstance(in_channels, (tuple, list))
        else tuple(in_channels)
    )
    if len(pair) != 2:
        raise ValueError(
            f"'in_channels' must be an int or a (source, "
            f'target) pair of ints (got {in_channels})'
        )
    for value in pair:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(
                f"'in_channels' must be an int or a (source, "
                f'target) pair of ints (got {in_channels})'
            )
        if value < 1 and value != -1:
            raise ValueError(
                f"'in_channels' must be positive, or -1 for "
                f'lazy initialization (got {in_channels})'
            )
    return pair[0], pair[1]


def _sparse_to_edge_index(adj_t: Tensor, num_src: int, num_dst: int) -> Tensor:
    r"""Returns the :obj:`[2, E]` (source, target) edge index of a transposed
    :class:`torch.sparse` adjacency in the coalesced order of its entries
    (sorted by target, then by source) for every layout, the order in which
    :obj:`edge_attr` is read.
    """
    if adj_t.layout == torch.sparse_coo:
        # Not `to_edge_index`: it flags an uncoalesced input as coalesced
        # in place and reads its entries in storage order.
        index = adj_t._indices()
        if not adj_t.is_coalesced():
            index = coalesce(index, num_nodes=max(num_src, num_dst))
        return index.flip(0)
    index, _ = to_edge_index(adj_t)
    if adj_t.layout == torch.sparse_csc:
        # CSC stores its entries column by column (by source), each column
        # sorted by row: a stable sort by row (target) gives the order of
        # COO and CSR.
        index = index[:, torch.argsort(index[0], stable=True)]
    return index.flip(0)


def _check_index_range(edge_index: Tensor, num_src: int, num_dst: int):
    if edge_index.device.type != 'cpu':
        # No host sync on accelerators: an asynchronous device-side
        # assertion, reported at a later synchronization.
        low = edge_index.min()
        bounds = edge_index.amax(dim=1)
        torch._assert_async(
            (low >= 0) & (bounds[0] < num_src) & (bounds[1] < num_dst),
            f"'edge_index' holds node indices out of range: expected "
            f'sources in [0, {num_src}) and targets in [0, {num_dst})',
        )
        return
    bounds: List[int] = torch.cat(
        [edge_index.min().view(1), edge_index.amax(dim=1)]
    ).tolist()
    low, src_max, dst_max = bounds[0], bounds[1], bounds[2]
    if low < 0 or src_max >= num_src or dst_max >= num_dst:
        raise ValueError(
            f"'edge_index' holds node indices out of range: expected "
            f'sources in [0, {num_src}) and targets in [0, '
            f'{num_dst}) (got minimum {low}, source maximum '
            f'{src_max}, target maximum {dst_max})'
        )


def _check_sparse_size(rows: int, cols: int, num_src: int, num_dst: int):
    if rows != num_dst or cols != num_src:
        raise ValueError(
            f'Expected a transposed sparse adjacency of size [{num_dst}, '
            f'{num_src}] (num_target_nodes, num_source_nodes) (got '
            f'[{rows}, {cols}])'
        )
