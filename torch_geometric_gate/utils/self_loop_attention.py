from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric import EdgeIndex, is_compiling
from torch_geometric.typing import SparseTensor
from torch_geometric.utils import (
    is_torch_sparse_tensor,
    scatter,
    to_edge_index,
)

from torch_geometric_gate.utils._validation import as_int, check_edge_index


def self_loop_attention(
    edge_index: Union[Tensor, SparseTensor],
    alpha: Optional[Tensor] = None,
    num_nodes: Optional[int] = None,
) -> Tensor:
    r"""Returns the self-attention :math:`\alpha_{v,v}` of every node from the
    attention weights that
    :class:`~torch_geometric_gate.nn.conv.GATEConv` (or a PyG attention
    layer that returns them as it does, as
    :class:`~torch_geometric.nn.conv.GATConv` and
    :class:`~torch_geometric.nn.conv.GATv2Conv` do) returns with
    :obj:`return_attention_weights=True`.

    :math:`\alpha_{v,v} = 1 - \sum_{u \neq v} \alpha_{u,v}` is the quantity
    the GATE paper plots: :math:`1` means that node :math:`v` ignores its
    neighbors (the layer acts like an MLP for it), :math:`0` means that it
    ignores its own features. A node without a self-loop gets :obj:`0`.
    Several loop edges of the same node are summed (masked duplicates carry
    zero weight).

    The attention weights returned with
    :obj:`return_attention_weights=True` may be passed as they come,
    :obj:`self_loop_attention(attention)`, for any adjacency; a pair
    :obj:`(edge_index, alpha)` or :obj:`(adj, adj.values())` may also be
    unpacked, :obj:`self_loop_attention(*attention)`.

    Args:
        edge_index (torch.Tensor or SparseTensor): The edge indices
            :obj:`[2, num_edges]` returned with the attention weights, or the
            (transposed) sparse adjacency that carries them as values, or
            the whole :obj:`(edge_index, alpha)` pair returned.
        alpha (torch.Tensor, optional): The attention weights
            :obj:`[num_edges]` or :obj:`[num_edges, heads]`. For sparse
            input, whose values are used, :obj:`None` or those values (the
            second item of the :obj:`(adj, adj.values())` pair returned for
            a :class:`torch.sparse.Tensor` adjacency). (default: :obj:`None`)
        num_nodes (int, optional): The number of (target) nodes, more than
            the largest target index. If not given: an
            :class:`~torch_geometric.EdgeIndex`'s number of targets where it
            knows it, else, as PyG's :obj:`maybe_num_nodes`, the largest
            node index plus one (pass it for a bipartite graph, or nodes
            past the last that have no edge). (default: :obj:`None`)

    :rtype: :class:`torch.Tensor` of shape :obj:`[num_nodes, heads]`
        (:obj:`[num_nodes]` for one-dimensional :obj:`alpha`)

    Example:
        >>> edge_index = torch.tensor([[0, 1, 0, 1], [1, 0, 0, 1]])
        >>> alpha = torch.tensor([0.25, 0.5, 0.75, 0.5])
        >>> self_loop_attention(edge_index, alpha)
        tensor([0.7500, 0.5000])
    """
    if not torch.jit.is_scripting():
        # TorchScript enforces these types itself:
        edge_index, alpha, num_nodes = _check_python_args(
            edge_index, alpha, num_nodes
        )

    if isinstance(edge_index, SparseTensor):
        if not edge_index.has_value():
            # `to_edge_index` would read a weight of 1 per edge:
            raise ValueError(
                'Expected a SparseTensor that carries the attention weights '
                "as its values, as 'return_attention_weights=True' returns "
                'it (got one without values; pass the returned adjacency, '
                'not the input one)'
            )
        num_nodes = edge_index.size(0) if num_nodes is None else num_nodes
        adj_index, weights = to_edge_index(edge_index)  # `adj_t`: row = dst
        if alpha is not None:
            _check_sparse_values(alpha, weights)
        index = adj_index.flip(0)
    elif is_torch_sparse_tensor(edge_index):
        if alpha is not None:
            # The values in the caller's order (before any coalescing):
            if edge_index.layout == torch.sparse_coo:
                _check_sparse_values(alpha, edge_index._values())
            else:
                _check_sparse_values(alpha, edge_index.values())
        num_nodes = edge_index.size(0) if num_nodes is None else num_nodes
        if (
            edge_index.layout == torch.sparse_coo
            and not edge_index.is_coalesced()
        ):
            # `to_edge_index` would flag the caller's tensor as coalesced.
            edge_index = edge_index.coalesce()
        adj_index, weights = to_edge_index(edge_index)
        index = adj_index.flip(0)
    else:
        # The index first: a list, a tuple of other length or a float
        # tensor is named as such, not as a missing 'alpha'.
        index = check_edge_index(edge_index, None, check_range=False)
        if alpha is None:
            raise ValueError("'alpha' is required with an edge index tensor")
        weights = alpha

    if not torch.is_floating_point(weights):
        raise TypeError(
            f'Expected floating-point attention weights (got '
            f"'{weights.dtype}')"
        )
    if weights.dim() not in (1, 2):
        raise ValueError(
            f'Expected attention weights of shape [num_edges] or '
            f'[num_edges, heads] (got {list(weights.size())})'
        )
    if weights.size(0) != index.size(1):
        raise ValueError(
            f'Expected one attention weight row per edge (got '
            f'{weights.size(0)} rows for {index.size(1)} edges)'
        )
    if num_nodes is not None and num_nodes < 0:
        raise ValueError(f"'num_nodes' must be non-negative (got {num_nodes})")
    if not is_compiling() and index.numel() > 0:
        # One host sync for all checks; skipped under torch.compile.
        bounds: List[int] = torch.stack(
            [index.min(), index.max(), index[1].max()]
        ).tolist()
        if bounds[0] < 0:
            raise ValueError(
                f"'edge_index' holds node indices out of range: expected "
                f'non-negative node indices (got minimum {bounds[0]})'
            )
        if num_nodes is None:
            num_nodes = bounds[1] + 1
        elif bounds[2] >= num_nodes:
            raise ValueError(
                f"'num_nodes' ({num_nodes}) is too small: 'edge_index' has "
                f'target node {bounds[2]}; expected targets in '
                f'[0, num_nodes)'
            )
    if num_nodes is None:
        num_nodes = int(index.max()) + 1 if index.numel() > 0 else 0

    is_loop = index[0] == index[1]
    is_loop = is_loop.view([-1] + [1] * (weights.dim() - 1))
    return scatter(weights * is_loop, index[1], 0, num_nodes, 'sum')


def _check_sparse_values(alpha: Tensor, values: Tensor) -> None:
    # `alpha` beside a sparse adjacency must be its values: the second item
    # of the `(adj, adj.values())` pair of `return_attention_weights=True`.
    # (NaN weights, of a diverged model, count as equal.)
    same = alpha.size() == values.size() and bool(
        ((alpha == values) | (alpha.isnan() & values.isnan())).all()
    )
    if not same:
        raise ValueError(
            "'alpha' must be None or the values of the sparse adjacency, "
            'which are the attention weights (as in the (adj, adj.values()) '
            "pair of 'return_attention_weights=True'); got weights of shape "
            f'{list(alpha.size())} that differ from its values of shape '
            f'{list(values.size())}'
        )


@torch.jit.unused
def _check_python_args(
    edge_index, alpha, num_nodes
) -> Tuple[Union[Tensor, SparseTensor], Optional[Tensor], Optional[int]]:
    if (
        isinstance(edge_index, tuple)
        and len(edge_index) == 2
        and isinstance(edge_index[0], (Tensor, SparseTensor))
        and isinstance(edge_index[1], Tensor)
    ):
        # The pair `return_attention_weights=True` returns, passed whole:
        if alpha is not None:
            raise TypeError(
                'Expected either the (edge_index, alpha) pair of '
                "'return_attention_weights=True' or 'edge_index' and "
                "'alpha' as two arguments (got the pair and 'alpha')"
            )
        edge_index, alpha = edge_index
    if alpha is not None and not isinstance(alpha, Tensor):
        raise TypeError(
            f"Expected 'alpha' to be a torch.Tensor (got "
            f'{type(alpha).__name__}; convert it with torch.as_tensor)'
        )
    num_nodes = as_int(num_nodes, 'num_nodes', optional=True)
    if num_nodes is None and isinstance(edge_index, EdgeIndex):
        num_nodes = edge_index.sparse_size(1)  # the targets; None if unknown
    return edge_index, alpha, num_nodes
