from typing import Optional, Union

import torch  # noqa: F401 (used in the docstring example)
from torch import Tensor
from torch_geometric.typing import SparseTensor
from torch_geometric.utils import (
    is_torch_sparse_tensor,
    scatter,
    to_edge_index,
)


def self_loop_attention(
    edge_index: Union[Tensor, SparseTensor],
    alpha: Optional[Tensor] = None,
    num_nodes: Optional[int] = None,
) -> Tensor:
    r"""Returns the self-attention :math:`\alpha_{v,v}` of every node from the
    attention weights that
    :class:`~torch_geometric_gate.nn.conv.GATEConv` (or any PyG attention
    layer) returns with :obj:`return_attention_weights=True`.

    :math:`\alpha_{v,v} = 1 - \sum_{u \neq v} \alpha_{u,v}` is the quantity
    the GATE paper plots: :math:`1` means that node :math:`v` ignores its
    neighbors (the layer acts like an MLP for it), :math:`0` means that it
    ignores its own features. A node without a self-loop gets :obj:`0`.
    Several loop edges of the same node are summed (masked duplicates carry
    zero weight).

    Args:
        edge_index (torch.Tensor or SparseTensor): The edge indices
            :obj:`[2, num_edges]` returned with the attention weights, or the
            (transposed) sparse adjacency that carries them as values.
        alpha (torch.Tensor, optional): The attention weights
            :obj:`[num_edges]` or :obj:`[num_edges, heads]`. Must be
            :obj:`None` for sparse input, whose values are used.
            (default: :obj:`None`)
        num_nodes (int, optional): The number of (target) nodes. Inferred
            from :obj:`edge_index` if not given. (default: :obj:`None`)

    :rtype: :class:`torch.Tensor` of shape :obj:`[num_nodes, heads]`
        (:obj:`[num_nodes]` for one-dimensional :obj:`alpha`)

    Example:
        >>> edge_index = torch.tensor([[0, 1, 0, 1], [1, 0, 0, 1]])
        >>> alpha = torch.tensor([0.25, 0.5, 0.75, 0.5])
        >>> self_loop_attention(edge_index, alpha)
        tensor([0.7500, 0.5000])
    """
    if isinstance(edge_index, SparseTensor):
        if alpha is not None:
            raise ValueError(
                "'alpha' must be None for a sparse adjacency: "
                'its values are the attention weights'
            )
        num_nodes = edge_index.size(0) if num_nodes is None else num_nodes
        adj_index, weights = to_edge_index(edge_index)  # `adj_t`: row = dst
        index = adj_index.flip(0)
    elif is_torch_sparse_tensor(edge_index):
        if alpha is not None:
            raise ValueError(
                "'alpha' must be None for a sparse adjacency: "
                'its values are the attention weights'
            )
        num_nodes = edge_index.size(0) if num_nodes is None else num_nodes
        adj_index, weights = to_edge_index(edge_index)
        index = adj_index.flip(0)
    else:
        if alpha is None:
            raise ValueError("'alpha' is required with an edge index tensor")
        index, weights = edge_index, alpha

    if index.dim() != 2 or index.size(0) != 2:
        raise ValueError("Expected 'edge_index' of shape [2, num_edges]")
    if weights.size(0) != index.size(1):
        raise ValueError(
            f'Expected one attention weight row per edge (got '
            f'{weights.size(0)} rows for {index.size(1)} edges)'
        )
    if num_nodes is None:
        num_nodes = int(index.max()) + 1 if index.numel() > 0 else 0

    is_loop = index[0] == index[1]
    is_loop = is_loop.view([-1] + [1] * (weights.dim() - 1))
    return scatter(weights * is_loop, index[1], 0, num_nodes, 'sum')
