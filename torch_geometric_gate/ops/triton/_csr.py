r"""The CSR that the Triton kernels walk, built per call: the incoming edges
of every target node (forward) and the outgoing edges of every source node
(backward), self-loops included.

From a sorted :class:`torch_geometric.EdgeIndex`
(:obj:`AttentionGraph.edge_index`) it takes PyG's cached CSC and CSR
(computed once per :obj:`EdgeIndex`) and merges the appended self-loops in
without a sort; from plain tensors it sorts (a stable :func:`torch.argsort`
and :func:`~torch_geometric.index.index2ptr`). Neither syncs with the
device.
"""

from typing import NamedTuple, Optional

import torch
from torch import Tensor
from torch_geometric.index import index2ptr, ptr2index

from torch_geometric_gate.ops.types import AttentionGraph


class CSR(NamedTuple):
    r"""The incoming edges sorted by target: the edge (index into
    :obj:`AttentionGraph.src`) at every CSR position, its source (int32),
    and the row pointer (int32)."""

    perm: Tensor
    src: Tensor
    rowptr: Tensor


def _check_int32(num_edges: int, *nums: int) -> None:
    if num_edges >= 2**31 or any(num >= 2**31 for num in nums):
        raise RuntimeError('The Triton kernels index with int32')


def _pad_ptr(ptr: Tensor, num: int) -> Optional[Tensor]:
    r"""A compressed pointer over :obj:`num` nodes (an :obj:`EdgeIndex` of
    a smaller sparse size gets empty trailing rows), or :obj:`None` if it
    spans more."""
    if ptr.numel() - 1 > num:
        return None
    if ptr.numel() - 1 < num:
        ptr = torch.cat([ptr, ptr[-1:].expand(num + 1 - ptr.numel())])
    return ptr


def _merge_loops(ptr, node, values, loop_values, num_loops):
    r"""Appends the self-loop of node :obj:`i < num_loops` (value
    :obj:`loop_values[i]`) at the end of node :obj:`i`'s segment of a
    compressed array (:obj:`ptr`, the node of every position, the value at
    every position), without a sort: returns the new pointer and values."""
    num = ptr.numel() - 1
    loops = num_loops
    ahead = torch.arange(num + 1, device=ptr.device).clamp_(max=loops)
    new_ptr = ptr + ahead
    total = values.numel() + loops
    out = values.new_empty(total)
    pos = torch.arange(values.numel(), device=ptr.device)
    out[pos + node.clamp(max=loops)] = values
    if loops > 0:
        at = ptr[1 : loops + 1] + torch.arange(loops, device=ptr.device)
        out[at] = loop_values
    return new_ptr, out


def edge_index_of(graph: AttentionGraph):
    r"""The caller's sorted :class:`torch_geometric.EdgeIndex` when it can
    give the CSR (its edges are the first ones of :obj:`graph`), else
    :obj:`None`."""
    from torch_geometric import EdgeIndex

    ei = graph.edge_index
    if not isinstance(ei, EdgeIndex) or not ei.is_sorted:
        return None
    if ei.size(1) != graph.src.numel() - graph.num_loops:
        return None
    if ei.device != graph.src.device:
        return None
    return ei


def forward_csr(graph: AttentionGraph) -> CSR:
    num_edges = graph.src.numel()
    _check_int32(num_edges, graph.num_src, graph.num_dst)
    device = graph.src.device
    ei = edge_index_of(graph)
    if ei is not None:
        # PyG caches the CSC on the EdgeIndex (colptr; for an EdgeIndex
        # sorted by row also the permutation): computed once per graph.
        (colptr, _), perm0 = ei.get_csc()
        colptr = _pad_ptr(colptr, graph.num_dst)
        if colptr is not None:
            num_input = num_edges - graph.num_loops
            if perm0 is None:
                perm0 = torch.arange(num_input, device=device)
            node = ptr2index(colptr, output_size=num_input)
            loops = torch.arange(num_input, num_edges, device=device)
            rowptr, perm = _merge_loops(
                colptr, node, perm0.long(), loops, graph.num_loops
            )
            src = graph.src.index_select(0, perm).int()
            return CSR(perm.int(), src, rowptr.int())
    # A stable argsort and index2ptr per call:
    perm = torch.argsort(graph.dst, stable=True)
    rowptr = index2ptr(graph.dst.index_select(0, perm).int(), graph.num_dst)
    src = graph.src.index_select(0, perm).int()
    return CSR(perm.int(), src, rowptr)


def reverse_csr(graph_ei, csr: CSR, num_src: int, num_loops: int):
    r"""The reverse CSR over the CSR positions, sorted by source: the row
    pointer and the CSR position of every outgoing edge (int32)."""
    num_edges = csr.src.numel()
    device = csr.src.device
    if graph_ei is not None:
        (rowptr0, _), perm_t = graph_ei.get_csr()  # cached by PyG
        rowptr0 = _pad_ptr(rowptr0, num_src)
        if rowptr0 is not None:
            num_input = num_edges - num_loops
            pos_of = torch.empty(num_edges, dtype=torch.int32, device=device)
            pos_of[csr.perm.long()] = torch.arange(
                num_edges, dtype=torch.int32, device=device
            )
            values = pos_of[:num_input]
            if perm_t is not None:
                values = values.index_select(0, perm_t)
            node = ptr2index(rowptr0, output_size=num_input)
            rev_rowptr, rev_pos = _merge_loops(
                rowptr0, node, values, pos_of[num_input:], num_loops
            )
            return rev_rowptr.int(), rev_pos
    rev_pos = torch.argsort(csr.src, stable=True)
    rev_rowptr = index2ptr(csr.src.index_select(0, rev_pos), num_src)
    return rev_rowptr, rev_pos.int()
