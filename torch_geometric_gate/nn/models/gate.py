import warnings
from typing import Any, Callable, Final, List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch.nn import Identity
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.models.basic_gnn import BasicGNN
from torch_geometric.typing import Adj, OptTensor

from torch_geometric_gate.nn.conv import GATEConv
from torch_geometric_gate.nn.inits import looks_linear_orthogonal_
from torch_geometric_gate.utils._validation import positive_int

_INITS = ('looks_linear', 'glorot')
# The Jumping Knowledge modes PyG's `BasicGNN` accepts:
_JK_MODES = (None, 'last', 'cat', 'max', 'lstm')


class _BatchIdentity(Identity):
    # The identity as a norm that takes the batch:
    def forward(
        self,
        x: Tensor,
        batch: OptTensor = None,
        batch_size: Optional[int] = None,
    ) -> Tensor:
        return x


class GATE(BasicGNN):
    r"""The GATE network from the `"GATE: How to Keep Out Intrusive
    Neighbors" <https://arxiv.org/abs/2406.00418>`_ paper (ICML 2024), a
    stack of :class:`~torch_geometric_gate.nn.conv.GATEConv` layers in the
    style of PyG's :class:`~torch_geometric.nn.models.GAT`.

    As in the paper, with :obj:`out_channels` given (and :obj:`jk=None`) the
    last layer is a :class:`~torch_geometric_gate.nn.conv.GATEConv` that
    outputs the :obj:`out_channels` logits directly, with no activation after
    it and no separate linear classifier; every other layer is followed by
    :obj:`act` (and :obj:`norm` and feature dropout, if set). With :obj:`jk`,
    all layers are followed by :obj:`act` and a final linear layer maps to
    :obj:`out_channels`, exactly as in
    :class:`~torch_geometric.nn.models.basic_gnn.BasicGNN`.

    Multiple heads follow PyG's :class:`~torch_geometric.nn.models.GAT`:
    hidden layers concatenate :obj:`heads` heads of
    :obj:`hidden_channels // heads` channels each (:obj:`hidden_channels`
    must then be divisible by :obj:`heads`), or average :obj:`heads` heads of
    :obj:`hidden_channels` channels with :obj:`concat=False`; a last layer
    that maps to :obj:`out_channels` always averages its heads.

    :meth:`forward_with_self_attention` returns, from the same single forward
    pass, the self-attention :math:`\alpha_{v,v}` of every node in every
    layer (:math:`1`: the layer ignores the node's neighbors, :math:`0`: it
    ignores the node itself), by each layer's
    :meth:`~torch_geometric_gate.nn.GATEConv.forward_with_self_attention`
    (on a GPU, the Triton kernels compute the self-loops' weights alone).
    :meth:`forward` does not compute it.

    **Edge weights.** GATE does not use edge weights:
    :meth:`forward` raises a :class:`ValueError` for an
    :obj:`edge_weight` (PyG's
    :class:`~torch_geometric.nn.models.basic_gnn.BasicGNN` would silently
    ignore it). Pass them as edge features instead,
    :obj:`edge_attr=edge_weight.view(-1, 1)` with :obj:`edge_dim=1`, and the
    attention scores them.

    **Initialisation.** With :obj:`init='looks_linear'` (the paper's
    Appendix B), the weights :obj:`lin` (:math:`\mathbf{W}`), :obj:`lin_src`
    (:math:`\mathbf{U}`) and :obj:`lin_dst` (:math:`\mathbf{V}`) of every
    layer are filled by
    :func:`~torch_geometric_gate.nn.inits.looks_linear_orthogonal_` with the
    layer's position (:obj:`'first'`, :obj:`'hidden'`, :obj:`'last'`, or
    :obj:`'only'` for a one-layer network); the attention vectors start at
    zero. Without biases and with a ReLU, the network is then linear at
    initialisation: its output is :math:`\mathbf{A}^L \mathbf{X}
    \mathbf{D}_1^{\top} \cdots \mathbf{D}_L^{\top}`, with :math:`\mathbf{A}`
    the mean over each node's neighbors and itself. With
    :obj:`residual=True`, the skip-connection :obj:`res`
    (:math:`\mathbf{R}`) of every layer is filled alike, and layer
    :math:`l` maps :math:`\mathbf{H}` to :math:`\mathbf{A} \mathbf{H}
    \mathbf{D}_l^{\top} + \mathbf{H} \mathbf{R}_l^{\top}`. When
    :obj:`jk` is set, the last layer is initialised as a hidden one (an
    activation follows it) and the final :class:`~torch.nn.Linear` keeps
    PyG's default. Averaged
    heads (:obj:`concat=False`) are each filled as a whole layer, so that
    their mean is the mirrored pair of the mean of their blocks. A layer
    whose size the construction cannot take (odd :obj:`hidden_channels`, an
    odd input size of a last layer, lazy :obj:`in_channels=-1`) keeps the
    Glorot initialisation of
    :class:`~torch_geometric_gate.nn.conv.GATEConv`, with a
    :class:`UserWarning`. :obj:`init='glorot'` keeps Glorot everywhere.

    Args:
        in_channels (int or tuple): Size of each input sample, or :obj:`-1` to
            derive the size from the first input(s) to the forward method.
            A tuple corresponds to the sizes of source and target
            dimensionalities.
        hidden_channels (int): Size of each hidden sample.
        num_layers (int): Number of message passing layers.
        out_channels (int, optional): If not set to :obj:`None`, the last
            layer maps to :obj:`out_channels` (or, with :obj:`jk`, a final
            linear transformation does). (default: :obj:`None`)
        heads (int, optional): Number of attention heads per layer.
            (default: :obj:`1`)
        share_weights (bool, optional): If set to :obj:`True`, every layer is
            a GATE\ :sub:`S` layer, :math:`\mathbf{W} = \mathbf{U} =
            \mathbf{V}`. (default: :obj:`False`)
        dropout (float, optional): Dropout probability, applied (as in
            :class:`~torch_geometric.nn.models.GAT`) to the hidden features
            and to the attention coefficients. (default: :obj:`0.`)
        act (str or Callable, optional): The non-linear activation function to
            use. (default: :obj:`"relu"`)
        init (str, optional): :obj:`'looks_linear'` or :obj:`'glorot'`.
            (default: :obj:`'looks_linear'`)
        bias (bool, optional): If set to :obj:`True`, every layer learns an
            additive bias. The paper's networks have none, and the
            looks-linear argument holds without them. (default: :obj:`False`)
        **conv_kwargs (optional): Additional arguments of
            :class:`~torch_geometric.nn.models.basic_gnn.BasicGNN`
            (:obj:`act_first`, :obj:`act_kwargs`, :obj:`norm`,
            :obj:`norm_kwargs`, :obj:`jk`) and of
            :class:`~torch_geometric_gate.nn.conv.GATEConv`
            (:obj:`concat`, :obj:`negative_slope`, :obj:`add_self_loops`,
            :obj:`edge_dim`, :obj:`residual`, ...). :obj:`v2=True` of
            :class:`~torch_geometric.nn.models.GAT` is taken (GATE's layers
            score the edges as :class:`~torch_geometric.nn.conv.GATv2Conv`
            does); :obj:`v2=False` raises a :class:`ValueError`.

    Example:
        >>> import torch
        >>> from torch_geometric_gate.nn.models import GATE
        >>> x = torch.randn(4, 8)
        >>> edge_index = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
        >>> model = GATE(8, 16, num_layers=3, out_channels=2)
        >>> model(x, edge_index).shape
        torch.Size([4, 2])
        >>> out, alpha_vv = model.forward_with_self_attention(x, edge_index)
        >>> len(alpha_vv), alpha_vv[0].shape
        (3, torch.Size([4, 1]))
        >>> alpha_vv[0].view(-1)  # zero attention: a node and its neighbor
        tensor([0.5000, 0.5000, 0.5000, 0.5000], grad_fn=<...>)
    """

    supports_edge_weight: Final[bool] = False
    supports_edge_attr: Final[bool] = True
    supports_norm_batch: Final[bool]

    def __init__(
        self,
        in_channels: Union[int, Tuple[int, int]],
        hidden_channels: int,
        num_layers: int,
        out_channels: Optional[int] = None,
        heads: int = 1,
        share_weights: bool = False,
        dropout: float = 0.0,
        act: Union[str, Callable, None] = 'relu',
        init: str = 'looks_linear',
        bias: bool = False,
        **conv_kwargs: Any,
    ):
        # Python or NumPy integers (as PyG's `GAT` takes them), kept as
        # Python ints (the scripted model needs them):
        hidden_channels = positive_int(hidden_channels, 'hidden_channels')
        num_layers = positive_int(num_layers, 'num_layers')
        heads = positive_int(heads, 'heads')
        if out_channels is not None:
            try:
                out_channels = positive_int(out_channels, 'out_channels')
            except (TypeError, ValueError):
                raise ValueError(
                    f"'out_channels' must be None or a positive int "
                    f'(got {out_channels!r})'
                ) from None
        if init not in _INITS:
            raise ValueError(f"'init' must be one of {_INITS} (got {init!r})")
        # PyG's `GAT` builds `GATv2Conv` layers with `v2=True`; GATE's are
        # scored as those are, and have no `GATConv` form:
        if not conv_kwargs.pop('v2', True):
            raise ValueError(
                "GATE has no 'v2=False' (GATConv) form: its layers score the "
                "edges as GATv2Conv does, as with 'v2=True'; drop 'v2'"
            )
        jk = conv_kwargs.get('jk')
        if jk not in _JK_MODES:
            raise ValueError(f"'jk' must be one of {_JK_MODES} (got {jk!r})")
        # Every layer but the one that maps to `out_channels` (without `jk`)
        # concatenates heads of `hidden_channels // heads` channels:
        concats_hidden = num_layers > 1 or out_channels is None or jk
        if (
            concats_hidden
            and conv_kwargs.get('concat', True)
            and hidden_channels % heads != 0
        ):
            raise ValueError(
                f"With concatenated heads, 'hidden_channels' (got "
                f"{hidden_channels}) must be divisible by 'heads' (got "
                f"{heads}); pass 'concat=False' to average the heads instead"
            )
        self.init = init
        super().__init__(
            in_channels,
            hidden_channels,
            num_layers,
            out_channels=out_channels,
            dropout=dropout,
            act=act,
            heads=heads,
            share_weights=share_weights,
            bias=bias,
            **conv_kwargs,
        )
        if self.supports_norm_batch and type(self.norms[-1]) is Identity:
            # Never called (the last layer's), but TorchScript compiles the
            # call with the batch for every layer (PyG's `BasicGNN` cannot
            # be scripted with such a norm):
            self.norms[-1] = _BatchIdentity()
        self._apply_init()

    def init_conv(
        self,
        in_channels: Union[int, Tuple[int, int]],
        out_channels: int,
        **kwargs,
    ) -> MessagePassing:
        heads = kwargs.pop('heads', 1)
        concat = kwargs.pop('concat', True)
        # As in PyG's `GAT`: a layer that maps to `out_channels` averages its
        # heads; other layers concatenate `heads` heads of
        # `out_channels // heads` channels.
        if getattr(self, '_is_conv_to_out', False):
            concat = False
        if concat:
            out_channels = out_channels // heads
        return GATEConv(
            in_channels,
            out_channels,
            heads=heads,
            concat=concat,
            dropout=self.dropout.p,
            **kwargs,
        )

    def reset_parameters(self):
        r"""Resets all learnable parameters of the module (with the
        initialisation chosen by :obj:`init`).
        """
        super().reset_parameters()
        self._apply_init()

    def _apply_init(self):
        if self.init != 'looks_linear':
            return
        num_convs = len(self.convs)
        # With `jk`, an activation follows the last layer too:
        last_is_output = self.jk_mode is None
        for i, conv in enumerate(self.convs):
            is_first = i == 0
            is_last = i == num_convs - 1 and last_is_output
            if is_first and is_last:
                position = 'only'
            elif is_first:
                position = 'first'
            elif is_last:
                position = 'last'
            else:
                position = 'hidden'
            # The skip-connection `res` (`residual=True`) adds the input's
            # map to the (head-averaged) output: filled alike, the sum keeps
            # the mirrored pairs, and the layer stays linear.
            for lin in (conv.lin, conv.lin_src, conv.lin_dst, conv.res):
                if lin is None:  # `share_weights`: `lin` only; no `res`.
                    continue
                weight = lin.weight
                if isinstance(
                    weight, torch.nn.parameter.UninitializedParameter
                ):
                    warnings.warn(
                        f'Layer {i} of GATE has lazy input channels '
                        f"('in_channels=-1'), so the looks-linear "
                        f'initialisation cannot be applied when the model '
                        f'is built; it keeps the Glorot initialisation',
                        stacklevel=3,
                    )
                    continue
                # Averaged heads (`concat=False`) each get the whole
                # construction: their mean keeps the mirrored pairs that
                # the next layer reads (mirrored across the heads, one head
                # would be the negative of another and their mean zero).
                blocks = [weight]
                if (
                    lin is not conv.res
                    and not conv.concat
                    and position in ('first', 'hidden')
                ):
                    blocks = weight.view(conv.heads, -1, weight.size(1))
                try:
                    for block in blocks:
                        looks_linear_orthogonal_(block, position)
                except ValueError as e:
                    warnings.warn(
                        f'Layer {i} of GATE keeps the Glorot initialisation '
                        f'because its weight of shape '
                        f'{list(weight.size())} does not fit the '
                        f'looks-linear construction: {e}',
                        stacklevel=3,
                    )

    def forward(
        self,
        x: Tensor,
        edge_index: Adj,
        edge_weight: OptTensor = None,
        edge_attr: OptTensor = None,
        batch: OptTensor = None,
        batch_size: Optional[int] = None,
        num_sampled_nodes_per_hop: Optional[List[int]] = None,
        num_sampled_edges_per_hop: Optional[List[int]] = None,
    ) -> Tensor:
        r"""Forward pass, as in
        :meth:`~torch_geometric.nn.models.basic_gnn.BasicGNN.forward`.

        GATE takes no :obj:`edge_weight`: a tensor there raises a
        :class:`ValueError`
        (:class:`~torch_geometric.nn.models.basic_gnn.BasicGNN` would
        silently drop it, as it does for every layer without edge
        weights). The attention decides how much each edge counts; to let
        it see a weight per edge, pass it as a one-dimensional edge feature,
        :obj:`edge_attr=edge_weight.view(-1, 1)`, to a model built with
        :obj:`edge_dim=1`.
        """
        # (`isinstance`: under `to_hetero`'s FX tracing, every argument is a
        # proxy, none a tensor.)
        if isinstance(edge_weight, Tensor):
            raise ValueError(
                "GATE does not use 'edge_weight' (the attention decides how "
                'much each edge counts); pass edge weights as edge features '
                "'edge_attr' of shape [num_edges, edge_dim] to a model "
                "built with 'edge_dim', e.g. "
                "'edge_attr=edge_weight.view(-1, 1)' with 'edge_dim=1'"
            )
        # `BasicGNN.forward` for a layer with edge features and without edge
        # weights (TorchScript cannot call the parent's `forward`).
        xs: List[Tensor] = []
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):  # noqa: B905
            if (
                not torch.jit.is_scripting()
                and num_sampled_nodes_per_hop is not None
            ):
                x, edge_index, value = self._trim(
                    i,
                    num_sampled_nodes_per_hop,
                    num_sampled_edges_per_hop,
                    x,
                    edge_index,
                    edge_attr,
                )
                edge_attr = value
            x = conv(x, edge_index, edge_attr=edge_attr)

            if i < self.num_layers - 1 or self.jk_mode is not None:
                if self.act is not None and self.act_first:
                    x = self.act(x)
                if self.supports_norm_batch:
                    x = norm(x, batch, batch_size)
                else:
                    x = norm(x)
                if self.act is not None and not self.act_first:
                    x = self.act(x)
                x = self.dropout(x)
                if hasattr(self, 'jk'):
                    xs.append(x)

        x = self.jk(xs) if hasattr(self, 'jk') else x
        x = self.lin(x) if hasattr(self, 'lin') else x
        return x

    @torch.jit.unused
    def inference(self, loader, *args, **kwargs) -> Tensor:
        r"""Layer-wise inference, as in
        :meth:`~torch_geometric.nn.models.basic_gnn.BasicGNN.inference`,
        which passes each layer :obj:`x` and :obj:`edge_index` only: a model
        built with :obj:`edge_dim` on a graph with :obj:`edge_attr` raises a
        :class:`ValueError` (the edge features would be silently dropped).
        """
        data = getattr(loader, 'data', None)
        uses_edge_attr = any(conv.lin_edge is not None for conv in self.convs)
        if uses_edge_attr and getattr(data, 'edge_attr', None) is not None:
            raise ValueError(
                "GATE.inference cannot pass the graph's 'edge_attr' to its "
                "layers (PyG's BasicGNN.inference reads 'x' and "
                "'edge_index' only), so a model built with 'edge_dim' would "
                'ignore the edge features; run forward(x, edge_index, '
                'edge_attr=edge_attr) on the batches instead'
            )
        return super().inference(loader, *args, **kwargs)

    @torch.jit.export
    def forward_with_self_attention(
        self,
        x: Tensor,
        edge_index: Adj,
        edge_attr: OptTensor = None,
        batch: OptTensor = None,
        batch_size: Optional[int] = None,
    ) -> Tuple[Tensor, List[Tensor]]:
        r"""Runs the forward pass and also returns the self-attention
        :math:`\alpha_{v,v}` of every layer, as a list of :obj:`num_layers`
        tensors of shape :obj:`[num_nodes, heads]`, one row per node of the
        layer's output (the target nodes of a bipartite input), after
        attention dropout, if any, in training mode.

        Takes the arguments of :meth:`forward` (without
        :obj:`edge_weight`, which GATE does not support, and without the
        :obj:`trim_to_layer` arguments). Works in eager mode, under
        :func:`torch.jit.script` and under :func:`torch.compile`.
        """
        if not torch.jit.is_scripting() and batch is not None:
            if batch.is_floating_point() or batch.dim() != 1:
                # Say, forward's (x, edge_index, None, edge_attr) passed here:
                raise ValueError(
                    f"'batch' must be a one-dimensional integer tensor (got "
                    f'{batch.dtype} of shape {list(batch.shape)}); '
                    'forward_with_self_attention takes (x, edge_index, '
                    'edge_attr, batch, batch_size): no edge_weight'
                )
        alphas: List[Tensor] = []
        xs: List[Tensor] = []
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):  # noqa: B905
            # The layer's output and its self-attention, one row per target
            # node (the Triton kernels compute the self-loops' weights alone):
            x, alpha_vv = conv.forward_with_self_attention(
                x, edge_index, edge_attr
            )
            alphas.append(alpha_vv)

            if i < self.num_layers - 1 or self.jk_mode is not None:
                if self.act is not None and self.act_first:
                    x = self.act(x)
                if self.supports_norm_batch:
                    x = norm(x, batch, batch_size)
                else:
                    x = norm(x)
                if self.act is not None and not self.act_first:
                    x = self.act(x)
                x = self.dropout(x)
                if hasattr(self, 'jk'):
                    xs.append(x)

        x = self.jk(xs) if hasattr(self, 'jk') else x
        x = self.lin(x) if hasattr(self, 'lin') else x
        return x, alphas

    def __repr__(self) -> str:
        return (
            f'{self.__class__.__name__}({self.in_channels}, '
            f'{self.out_channels}, num_layers={self.num_layers}, '
            f'heads={self.convs[0].heads})'
        )


__all__ = ['GATE']
