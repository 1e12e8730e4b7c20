"""Input checks shared by the utilities and transforms (private)."""

from typing import List, Optional

import torch
from torch import Tensor
from torch_geometric import is_compiling


def check_edge_index(
    edge_index,
    num_nodes: Optional[int],
    name: str = 'edge_index',
    check_range: bool = True,
) -> Tensor:
    r"""Checks that :obj:`edge_index` is an integer :obj:`[2, num_edges]`
    tensor with node indices in :obj:`[0, num_nodes)` (only non-negative
    when :obj:`num_nodes` is :obj:`None`), as
    :class:`~torch_geometric_gate.nn.conv.GATEConv` does: a bool index would
    be read as a mask and a negative one would wrap around to the last
    nodes. Returns it as a :obj:`torch.long` tensor.

    The range check costs one host sync; it is skipped under
    :func:`torch.compile` (no data-dependent control flow) and with
    :obj:`check_range=False`.
    """
    if not isinstance(edge_index, Tensor):
        raise TypeError(
            f"Expected '{name}' to be a torch.Tensor of shape "
            f'[2, num_edges] (got {type(edge_index).__name__})'
        )
    if (
        torch.is_floating_point(edge_index)
        or torch.is_complex(edge_index)
        or edge_index.dtype == torch.bool
    ):
        raise TypeError(
            f"Expected '{name}' of an integer dtype (got '{edge_index.dtype}')"
        )
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(
            f"Expected '{name}' of shape [2, num_edges] "
            f'(got {list(edge_index.size())})'
        )
    if check_range and not is_compiling() and edge_index.numel() > 0:
        bounds: List[int] = torch.stack(
            [edge_index.min(), edge_index.max()]
        ).tolist()
        low, high = bounds[0], bounds[1]
        if low < 0 or (num_nodes is not None and high >= num_nodes):
            expected = (
                'non-negative node indices'
                if num_nodes is None
                else f'node indices in [0, {num_nodes})'
            )
            raise ValueError(
                f"'{name}' holds node indices out of range: expected "
                f'{expected} (got minimum {low}, maximum {high})'
            )
    return edge_index.long()
