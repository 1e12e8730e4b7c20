r"""Checks of the kernels' inputs that make no host sync (on the device,
or of what the host knows): shared by
:func:`~torch_geometric_gate.ops.gate_attention` and
:class:`~torch_geometric_gate.GATEConv`'s input checks."""

import torch
from torch import Tensor
from torch_geometric import EdgeIndex

from torch_geometric_gate.ops._compat import assert_async


def assert_rows_in_range(index: Tensor, bounds, error: str) -> None:
    r"""Raises :obj:`RuntimeError(error)` unless every row :obj:`i` of the
    integer :obj:`[len(bounds), E]` :obj:`index` lies in
    :obj:`[0, bounds[i])`, without a host sync (on CUDA the error arrives at
    the next synchronization); one reduction where the bounds are equal (5
    host operators)."""
    if index.numel() == 0:
        return
    if all(b == bounds[0] for b in bounds):
        low, high = torch.aminmax(index)
        valid = (low >= 0) & (high < bounds[0])
    else:
        high = index.amax(dim=1)
        valid = index.min() >= 0
        for i, bound in enumerate(bounds):
            valid = valid & (high[i] < bound)
    assert_async(valid, error)


def sparse_size_fits(
    edge_index: EdgeIndex, num_src: int, num_dst: int
) -> bool:
    r"""Whether the sparse size that :obj:`edge_index` knows (either may be
    :obj:`None`) is :obj:`(num_src, num_dst)`, as PyG's message passing
    requires whatever the flow (its CSR is the kernels' over its own
    targets)."""
    return all(
        known is None or known == size
        for known, size in zip(edge_index.sparse_size(), (num_src, num_dst))
    )
