"""Input checks of the package (private): :func:`as_int` for the integer
arguments of the datasets, transforms and utilities, :func:`as_real`
for their real ones, :func:`check_homogeneous` for the graph of the
transforms, :func:`positive_int`
for the sizes of the layer and the model,
:func:`check_edge_index` for the utilities and transforms,
:func:`check_conv_arguments` and :func:`check_conv_inputs` for
:class:`~torch_geometric_gate.nn.conv.GATEConv`.
"""

import math
import numbers
import operator
from typing import List, Optional

import numpy as np
import torch
from torch import Tensor
from torch_geometric import EdgeIndex, is_compiling
from torch_geometric.data import HeteroData
from torch_geometric.typing import SparseTensor
from torch_geometric.utils import is_torch_sparse_tensor

from torch_geometric_gate.ops._checks import (
    assert_rows_in_range,
    sparse_size_fits,
)


def as_int(
    value, name: str, minimum: Optional[int] = None, optional: bool = False
):
    r""":obj:`value` as a Python :obj:`int`: an :obj:`int`, a NumPy integer
    or an integer 0-d tensor (anything :func:`operator.index` takes), or
    :obj:`None` if :obj:`optional`. A bool, a float (which :func:`int`
    would truncate) or a string raises a :class:`TypeError` naming
    :obj:`name`, a value below :obj:`minimum` a :class:`ValueError`."""
    if optional and value is None:
        return None
    if not (
        isinstance(value, bool)
        or isinstance(value, Tensor)
        and (value.dim() != 0 or value.dtype == torch.bool)
    ):
        try:
            value = operator.index(value)
        except TypeError:
            pass
    if isinstance(value, bool) or not isinstance(value, int):
        kind = 'an int or None' if optional else 'an int'
        raise TypeError(
            f"'{name}' must be {kind} (got {type(value).__name__} {value!r})"
        )
    if minimum is not None and value < minimum:
        raise ValueError(f"'{name}' must be at least {minimum} (got {value})")
    return value


def as_real(value):
    r""":obj:`value` as a Python number if it is a real 0-d tensor or NumPy
    array (not a bool), else unchanged, for the caller's own check: a real
    argument takes them as :func:`as_int` takes integer ones."""
    if (
        isinstance(value, Tensor)
        and value.dim() == 0
        and value.dtype != torch.bool
        and not value.is_complex()
    ):
        return value.item()
    if (
        isinstance(value, np.ndarray)
        and value.ndim == 0
        and value.dtype.kind in 'iuf'
    ):
        return value.item()
    return value


def check_homogeneous(data, name: str) -> None:
    r"""Refuses a :class:`~torch_geometric.data.HeteroData` graph given to
    the transform :obj:`name`, which reads :obj:`data.x`, :obj:`data.y`
    and :obj:`data.edge_index` of a homogeneous graph (on a
    :class:`~torch_geometric.data.HeteroData` they are absent, and the
    transform failed with a message that did not say why)."""
    if isinstance(data, HeteroData):
        raise TypeError(
            f"'{name}' takes a homogeneous graph (torch_geometric.data.Data),"
            f' not HeteroData; apply it to data.to_homogeneous() or to a '
            f'Data object of one node type'
        )


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
    if isinstance(edge_index, SparseTensor) or (
        isinstance(edge_index, Tensor) and edge_index.layout != torch.strided
    ):
        raise TypeError(
            f"Expected '{name}' to be a torch.Tensor of shape [2, num_edges] "
            f'(got a sparse adjacency; its [2, num_edges] index is '
            'torch_geometric.utils.to_edge_index(adj)[0])'
        )
    if not isinstance(edge_index, Tensor):
        raise TypeError(
            f"Expected '{name}' to be a torch.Tensor of shape "
            f'[2, num_edges] (got {type(edge_index).__name__})'
        )
    if not _is_integer(edge_index):
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


# GATEConv's checks. The exported layer (KernelGATEConv) runs them: the
# argument checks before building the layer, the input checks first in its
# forward (in Python; a scripted layer runs the upstream file's own checks,
# PyG's level). The upstream file keeps what the layer needs to be correct:
# 'share_weights=True' with unequal channels, 'decomposed_layers > 1',
# 'edge_attr' without 'edge_dim', the explainer's mask size, and
# 'return_attention_weights=True' under TorchScript.
#
# Under torch.compile the input checks add no graph break, no recompilation
# and no host sync: their messages are formatted on failure only (a
# symbolic size formatted under torch.compile is specialized, one
# recompilation per size: issue 50.7), and the index range is checked by
# an asynchronous assertion.

_REDUCE = ('add', 'sum', 'mean', 'min', 'max', 'mul')


def _is_integer(tensor: Tensor) -> bool:
    return not (
        tensor.is_floating_point()
        or tensor.is_complex()
        or tensor.dtype == torch.bool
    )


def _is_real(value) -> bool:
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def positive_int(value, name: str, lazy: bool = False) -> int:
    r""":obj:`value` (a Python or NumPy integer, as :func:`as_int` takes
    it) as a positive Python :obj:`int`, or :obj:`-1` if :obj:`lazy`; the
    errors name :obj:`name` and that form."""
    kind = 'a positive int' + (', or -1 for lazy initialization,' * lazy)
    try:
        value = as_int(value, name)
    except TypeError:
        raise TypeError(f"'{name}' must be {kind} (got {value!r})") from None
    if not (value > 0 or lazy and value == -1):
        raise ValueError(f"'{name}' must be {kind} (got {value!r})")
    return value


def check_conv_arguments(
    in_channels,
    out_channels,
    heads,
    negative_slope,
    dropout,
    edge_dim,
    fill_value,
):
    r"""Checks the arguments of
    :class:`~torch_geometric_gate.nn.conv.GATEConv`; returns
    :obj:`in_channels, out_channels, heads, edge_dim` as Python ints
    (NumPy integers taken, as :class:`~torch_geometric.nn.conv.GATv2Conv`
    takes them; the layer's scripted form needs Python ints)."""
    pair = in_channels if isinstance(in_channels, (tuple, list)) else None
    if pair is not None and len(pair) != 2:
        raise ValueError(
            "'in_channels' must be an int or a pair (source, target) of "
            f'the bipartite graph (got {in_channels!r})'
        )
    src_channels, dst_channels = pair or (in_channels, in_channels)
    src_channels = positive_int(src_channels, 'in_channels', lazy=True)
    dst_channels = positive_int(dst_channels, 'in_channels', lazy=True)
    in_channels = (src_channels, dst_channels) if pair else src_channels
    out_channels = positive_int(out_channels, 'out_channels')
    heads = positive_int(heads, 'heads')
    if edge_dim is not None:
        edge_dim = positive_int(edge_dim, 'edge_dim', lazy=True)
    if not _is_real(negative_slope):
        raise ValueError("'negative_slope' must be a finite float")
    if not (_is_real(dropout) and 0 <= dropout < 1):
        raise ValueError("'dropout' must be a float in [0, 1)")
    if isinstance(fill_value, Tensor):
        # Any length until 'edge_dim' is known (lazy, -1; or None, where
        # it is never read): the first call checks it against edge_attr.
        known = edge_dim is not None and edge_dim > 0
        valid_fill = (
            fill_value.dim() <= 1
            and (fill_value.numel() in (1, edge_dim) or not known)
            and bool(torch.isfinite(fill_value).all())
        )
    elif isinstance(fill_value, str):
        valid_fill = fill_value in _REDUCE
    else:
        valid_fill = _is_real(fill_value)
    if not valid_fill:
        raise ValueError(
            "'fill_value' must be a finite float, a finite tensor of 1 or "
            f"'edge_dim' entries, or one of {_REDUCE}"
        )
    return in_channels, out_channels, heads, edge_dim


def check_conv_inputs(conv, x, edge_index, edge_attr):
    r"""Checks the inputs of
    :meth:`~torch_geometric_gate.nn.conv.GATEConv.forward` for the layer
    :obj:`conv`."""
    if isinstance(x, Tensor):
        x_src = x_dst = x
    else:
        x_src, x_dst = x[0], x[1]
    if not (
        isinstance(x_src, Tensor)
        and isinstance(x_dst, Tensor)
        and x_src.dim() == 2
        and x_dst.dim() == 2
    ):
        raise ValueError(
            'Expected node features of shape [num_nodes, channels], or a '
            '(source, target) pair of them'
        )
    lin_dst = conv.lin if conv.lin_dst is None else conv.lin_dst
    for lin, features, side in (
        (conv.lin, x_src, 'source'),
        (lin_dst, x_dst, 'target'),
    ):
        if lin.in_channels != -1 and lin.in_channels != features.size(1):
            raise ValueError(
                f"Expected {side} node features with 'in_channels' = "
                f'{lin.in_channels} columns (got {features.size(1)})'
            )
    num_src, num_dst = x_src.size(0), x_dst.size(0)

    if isinstance(edge_index, SparseTensor):
        # size(): PyG's stand-in without torch-sparse has no sparse_sizes()
        sizes = [edge_index.size(0), edge_index.size(1)]
    elif is_torch_sparse_tensor(edge_index):
        sizes = list(edge_index.shape)
    else:
        sizes = None
    if sizes is not None:
        if sizes != [num_dst, num_src]:
            raise ValueError(
                f'Expected a sparse adjacency of size [{num_dst}, {num_src}]'
            )
    else:
        _check_conv_edge_index(edge_index, num_src, num_dst, conv.flow)
        if isinstance(edge_index, EdgeIndex) and not sparse_size_fits(
            edge_index, num_src, num_dst
        ):  # (GATv2Conv's message passing raises too.)
            raise ValueError(
                f'Expected an EdgeIndex of sparse size ({num_src}, '
                f'{num_dst}), the number of source and target nodes of the '
                f'node features (got {tuple(edge_index.sparse_size())})'
            )

    if edge_attr is None or conv.lin_edge is None:
        return  # The layer refuses 'edge_attr' without 'edge_dim'.
    num_edges = _num_edges(edge_index)
    if edge_attr.dim() == 1:
        edge_attr = edge_attr.view(-1, 1)
    dim = conv.lin_edge.in_channels  # -1 until lazily initialized
    if not (
        edge_attr.dim() == 2
        and edge_attr.size(0) == num_edges
        and (dim == -1 or edge_attr.size(1) == dim)
    ):
        raise ValueError(
            f"Expected 'edge_attr' of shape [{num_edges}, {dim}] "
            f'(num_edges, edge_dim) (got {list(edge_attr.size())})'
        )
    if not edge_attr.is_floating_point():
        raise ValueError(
            "Expected floating-point 'edge_attr', as 'lin_edge' multiplies "
            f'it (got {edge_attr.dtype}; cast it first)'
        )
    fill = conv.fill_value
    if (
        conv.add_self_loops
        and isinstance(fill, Tensor)
        and fill.numel() not in (1, edge_attr.size(1))
    ):
        raise ValueError(
            f"Expected 'fill_value' of 1 or {edge_attr.size(1)} entries, "
            "one per column of 'edge_attr' (the appended self-loops' "
            f'features; got {fill.numel()})'
        )


def _check_conv_edge_index(edge_index, num_src: int, num_dst: int, flow: str):
    if not (
        isinstance(edge_index, Tensor)
        and edge_index.dim() == 2
        and edge_index.size(0) == 2
        and _is_integer(edge_index)
    ):
        what = (
            f'{edge_index.dtype} of shape {list(edge_index.shape)}'
            if isinstance(edge_index, Tensor)
            else type(edge_index).__name__
        )
        raise ValueError(
            "Expected 'edge_index' of integers of shape [2, num_edges] "
            f'(got {what})'
        )
    rows = (num_src, num_dst)
    error = (
        "'edge_index' holds node indices out of range: expected row 0 < "
        'the number of source nodes and row 1 < the number of target nodes'
    )
    if flow == 'target_to_source':
        # Targets in row 0: PyG's message passing reads them in x[1] and
        # sizes the output by x[0]; sources in row 1 read in x[0]:
        rows = (min(num_src, num_dst), num_src)
        error = (
            "'edge_index' holds node indices out of range: expected "
            "(flow='target_to_source') row 0 < min(the number of source "
            'nodes, the number of target nodes) and row 1 < the number of '
            'source nodes'
        )
    assert_rows_in_range(edge_index, rows, error)


def _num_edges(edge_index) -> int:
    # The number of edges the layer reads: a COO matrix's coalesced entries.
    if isinstance(edge_index, SparseTensor):
        return edge_index.nnz()
    if is_torch_sparse_tensor(edge_index):
        if edge_index.layout == torch.sparse_coo:
            edge_index = edge_index.coalesce()
        return edge_index._nnz()
    return edge_index.size(1)
