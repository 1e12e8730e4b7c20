r"""The CSR that the Triton kernels walk, built per call: the incoming edges
of every target node (forward) and the outgoing edges of every source node
(backward), self-loops included.

From a sorted :class:`torch_geometric.EdgeIndex`
(:obj:`AttentionGraph.edge_index`) it takes PyG's cached CSC and CSR
(computed once per :obj:`EdgeIndex`) and merges the appended self-loops in
without a sort, one launch each; from plain tensors one row-wise stable
:func:`torch.sort` of the edge index gives both, its sorted rows the row
pointers (:func:`csr_and_reverse`). Neither syncs with the
device.
"""

from typing import NamedTuple, Optional

import torch
from torch import Tensor

from torch_geometric_gate.ops._compat import index_to_ptr32, ptr_to_index32
from torch_geometric_gate.ops.triton._grid import cdiv, on_device
from torch_geometric_gate.ops.types import AttentionGraph

#: Positions per program of the kernels that finish the CSR of plain
#: tensors (:func:`csr_and_reverse`).
CSR_BLOCK = 1024


class CSR(NamedTuple):
    r"""The incoming edges sorted by target: the edge (index into
    :obj:`AttentionGraph.src`) at every CSR position, its source (int32),
    the row pointer (int32), the target of every CSR position (or
    :obj:`None`; the backward derives it from the row pointer), and the
    kinds of :func:`edge_kinds` where the build derived them (or
    :obj:`None`)."""

    perm: Tensor
    src: Tensor
    rowptr: Tensor
    dst: Optional[Tensor] = None
    kind: Optional[Tensor] = None


def _check_int32(num_edges: int, *nums: int) -> None:
    if num_edges >= 2**31 or any(num >= 2**31 for num in nums):
        raise RuntimeError(
            f'The Triton kernels index with int32: expected fewer than '
            f'2**31 edges and nodes, got {num_edges} edges and node counts '
            f"{nums}; run attention_kernel('chunked')"
        )


def _pad_ptr(ptr: Tensor, num: int) -> Optional[Tensor]:
    r"""A compressed pointer over :obj:`num` nodes (an :obj:`EdgeIndex` of
    a smaller sparse size gets empty trailing rows), or :obj:`None` if it
    spans more."""
    if ptr.numel() - 1 > num:
        return None
    if ptr.numel() - 1 < num:
        ptr = torch.cat([ptr, ptr[-1:].expand(num + 1 - ptr.numel())])
    return ptr


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
    r"""The CSR of :obj:`graph`: from its sorted :obj:`EdgeIndex` where it
    has one, else one stable sort of the targets."""
    _check_int32(graph.src.numel(), graph.num_src, graph.num_dst)
    got = _edge_index_csr(graph, reverse=False)
    if got is not None:
        return got[0]
    # One stable sort of the targets per call; its values give the row
    # pointer (and the targets in CSR order) without a gather:
    dst, perm = torch.sort(graph.dst, stable=True)
    rowptr = index_to_ptr32(dst, graph.num_dst)
    src = graph.src.index_select(0, perm).int()
    return CSR(perm.int(), src, rowptr, dst)


def csr_and_reverse(graph: AttentionGraph):
    r""":func:`forward_csr` and, for the backward, the reverse CSR: the
    row pointer over the sources and the CSR position of every outgoing
    edge (int32; :obj:`None` where the backward must sort,
    :func:`reverse_csr`). From plain tensors one sort gives both; from a
    sorted :obj:`EdgeIndex`, PyG's cached CSC and CSR."""
    _check_int32(graph.src.numel(), graph.num_src, graph.num_dst)
    got = _edge_index_csr(graph, reverse=True)
    if got is None:
        return _both_csr(graph)
    return got


def _edge_index_csr(graph: AttentionGraph, reverse: bool):
    r"""The CSR of :obj:`graph` from its sorted :obj:`EdgeIndex`
    (:func:`edge_index_of`) in one launch (:func:`gate_merge_csr_kernel`),
    and where :obj:`reverse` the reverse CSR in another
    (:func:`gate_merge_rev_kernel`; :obj:`None` where the :obj:`EdgeIndex`
    cannot give it), their int32 parts in one buffer; or :obj:`None`."""
    from torch_geometric_gate.ops.triton import _kernels as k

    num_edges, num_dst = graph.src.numel(), graph.num_dst
    num_src = graph.num_src
    ei = edge_index_of(graph)
    if ei is None:
        return None
    # PyG caches the CSC on the EdgeIndex (colptr; for an EdgeIndex sorted
    # by row also the permutation): computed once per graph.
    (colptr, _), perm0 = ei.get_csc()
    colptr = _pad_ptr(colptr, num_dst)
    if colptr is None:
        return None
    num_input = num_edges - graph.num_loops
    kinds = graph.loop is None and graph.masked is None
    # The int32 outputs as parts of one buffer (one allocation): the CSR,
    # the kinds, and for the reverse CSR every edge's CSR position, the
    # reverse row pointer and positions:
    sizes = [num_dst + 1, num_edges, num_edges, num_edges]
    sizes.append(num_edges if kinds else 0)
    sizes += [num_edges, num_src + 1, num_edges] if reverse else [0, 0, 0]
    out = torch.empty(sum(sizes), dtype=torch.int32, device=colptr.device)
    rowptr, perm, src, dst, kind, pos_of, rev_rowptr, rev_pos = out.split(
        sizes
    )
    block = CSR_BLOCK
    with on_device(colptr.device):
        k.gate_merge_csr_kernel[(cdiv(max(num_input, num_dst + 1), block),)](
            colptr, colptr if perm0 is None else perm0, graph.src,
            graph.dst, rowptr, perm, src, dst, kind, pos_of, num_dst,
            num_input, graph.num_loops,
            num_input if graph.mask_input_loops else 0,
            graph.src.stride(0), graph.dst.stride(0), block, perm0 is None,
            kinds, reverse,
        )  # fmt: skip
    csr = CSR(perm, src, rowptr, dst, kind if kinds else None)
    if not reverse:
        return csr, None
    (rowptr0, _), perm_t = ei.get_csr()  # cached by PyG
    rowptr0 = _pad_ptr(rowptr0, num_src)
    if rowptr0 is None:
        return csr, None
    with on_device(rowptr0.device):
        k.gate_merge_rev_kernel[(cdiv(max(num_input, num_src + 1), block),)](
            rowptr0, rowptr0 if perm_t is None else perm_t, graph.src,
            pos_of, rev_rowptr, rev_pos, num_src, num_input,
            graph.num_loops, graph.src.stride(0), block, perm_t is None,
        )  # fmt: skip
    return csr, (rev_rowptr, rev_pos)


def _both_csr(graph: AttentionGraph):
    r"""The CSR and the reverse CSR (:func:`csr_and_reverse`'s) of plain
    tensors from one row-wise stable sort of the :obj:`[2, E]` edge index:
    its sorted targets' row is the CSR's, its sorted sources' row the
    reverse CSR's (sources in the caller's edge order). Two launches
    (:func:`gate_csr_kernel`, :func:`gate_rev_pos_kernel`) finish both
    from the sort: the targets, edges and sources at every CSR position,
    both row pointers (binary searches of the sorted rows) and the CSR
    position at every reverse position, in int32 parts of one buffer."""
    from torch_geometric_gate.ops.triton import _kernels as k

    num_edges, num_dst = graph.src.numel(), graph.num_dst
    num_src = graph.num_src
    keys, order = torch.sort(
        torch.stack([graph.src, graph.dst]), dim=1, stable=True
    )
    # The edge kinds from the edges themselves where the graph has no
    # flags (edge_kinds), with the input's own self-loops masked where the
    # last num_loops edges are the appended ones:
    kinds = graph.loop is None and graph.masked is None
    num_input = num_edges - graph.num_loops if graph.mask_input_loops else 0
    # The int32 outputs as parts of one buffer (one allocation):
    sizes = [num_edges] * 5 + [num_dst + 1, num_src + 1]
    sizes.append(num_edges if kinds else 0)
    out = torch.empty(sum(sizes), dtype=torch.int32, device=keys.device)
    dst, perm, src, pos_of, rev_pos, rowptr, rev_rowptr, kind = out.split(
        sizes
    )
    block = CSR_BLOCK
    with on_device(keys.device):
        k.gate_csr_kernel[
            (cdiv(max(num_edges, num_dst + 1, num_src + 1), block),)
        ](
            keys, order, graph.src, dst, perm, src, pos_of, rowptr,
            rev_rowptr, kind, num_edges, num_dst, num_src, num_input,
            graph.src.stride(0), num_edges.bit_length(), block, kinds,
        )  # fmt: skip
        if num_edges > 0:
            k.gate_rev_pos_kernel[(cdiv(num_edges, block),)](
                order, pos_of, rev_pos, num_edges, block
            )
    csr = CSR(perm, src, rowptr, dst, kind if kinds else None)
    return csr, (rev_rowptr, rev_pos)


class WorkList(NamedTuple):
    r"""A work list of :func:`segments` within its buffers: node :obj:`v`'s
    first segment at :obj:`lists[first + v]`, its first partial slot at
    :obj:`lists[first + width + v]`, the node of program :obj:`j` at
    :obj:`nodes[node_first + j]`; :obj:`grid` programs and :obj:`slots`
    partial slots. A kernel takes its buffers (:meth:`buffers`, those of
    all lists: no view of each) and, after its other runtime arguments,
    the offsets (:meth:`offsets`)."""

    lists: Tensor
    nodes: Tensor
    first: int
    node_first: int
    width: int
    grid: int
    slots: int

    def buffers(self):
        return self.lists, self.nodes

    def offsets(self):
        return self.first, self.node_first, self.width


def segments(lists, num_edges: int, seg: int):
    r"""The work lists of the kernels over one or two compressed rows,
    :obj:`lists = [(rowptr, num), ...]`: node :obj:`v` gets :obj:`max(1,
    ceil(deg / seg))` segments, :obj:`segptr[v]` the first; the program
    :obj:`j` finds its node in :obj:`seg_node[j]` (:obj:`num` past the
    last segment). The grid, :obj:`num + E // seg`, bounds the number of
    segments from the shapes alone (no sync); so does
    :func:`split_slots` the partial results of split nodes, at
    :obj:`partptr[v]`. Two launches and one prefix sum for all lists
    (:func:`gate_seg_count_kernel`, :func:`gate_seg_node_kernel`), which
    the kernels read in place (:class:`WorkList`). Below :obj:`seg` edges
    no node is split: one segment per node, the work list an
    :obj:`arange` (no partial slots; :obj:`partptr`, read only for split
    nodes, is that :obj:`arange` too). Returns a :class:`WorkList` per
    list."""
    from torch_geometric_gate.ops.triton import _kernels as k

    device = lists[0][0].device
    slots = split_slots(num_edges, seg)
    if slots == 0:
        got = []
        for _, num in lists:
            nodes = torch.arange(num + 1, dtype=torch.int32, device=device)
            got.append(WorkList(nodes, nodes, 0, 0, 0, num, 0))
        return got
    assert 1 <= len(lists) <= 2
    (rowptr, num), (rowptr2, num2) = lists[0], lists[-1]
    grids = [n + num_edges // seg for _, n in lists]
    width = max(num, num2) + 1
    counts = torch.empty(2 * len(lists), width, dtype=torch.int32,
                         device=device)  # fmt: skip
    seg_node = torch.empty(sum(grids), dtype=torch.int32, device=device)
    block = CSR_BLOCK
    with on_device(device):
        k.gate_seg_count_kernel[(cdiv(width, block), len(lists))](
            rowptr, rowptr2, counts, num, num2, width, seg, block
        )
        ptrs = torch.cumsum(counts, 1, dtype=torch.int32)
        rest = max(g - n for g, (_, n) in zip(grids, lists))
        k.gate_seg_node_kernel[(cdiv(max(width, rest), block), len(lists))](
            ptrs, seg_node, num, num2, grids[0], grids[-1], width, block
        )
    # List i: rows 2 i (segments) and 2 i + 1 (slots) of ptrs, and its
    # programs' nodes after those of the lists before it:
    return [
        WorkList(
            ptrs,
            seg_node,
            2 * i * width,
            sum(grids[:i]),
            width,
            grids[i],
            slots,
        )  # fmt: skip
        for i in range(len(lists))
    ]


def split_slots(num_edges: int, seg: int) -> int:
    r"""The partial slots of :func:`segments`' split nodes (a bound from
    the shapes alone; none below :obj:`seg` edges)."""
    return 2 * (num_edges // seg) if num_edges >= seg else 0


def segments_of(settings, rowptr: Tensor, num: int, num_edges: int, seg: int,
                also=None):  # fmt: skip
    r""":func:`segments`, computed once per row pointer and segment length
    of a call and kept on :obj:`settings` (the forward's list is the
    backward's first pass's); with :obj:`also` (another row pointer and
    its nodes: the reverse CSR's, for the backward's second pass), both
    lists at once."""
    cache = settings.__dict__.setdefault('segments', {})

    def key(ptr, n):
        # Below `seg` edges the list depends on the number of nodes alone:
        return ('nodes', n) if num_edges < seg else (id(ptr), seg)

    first = key(rowptr, num)
    if first not in cache:
        lists = [(rowptr, num)]
        if also is not None and key(*also) not in (*cache, first):
            lists.append(also)
        for (ptr, n), got in zip(lists, segments(lists, num_edges, seg)):
            cache[key(ptr, n)] = (ptr, got)  # (the key's tensor kept alive)
    return cache[first][1]


def csr_dst(csr: CSR) -> Tensor:
    r"""The target of every CSR position (from :obj:`csr.dst`, else the
    row pointer)."""
    if csr.dst is not None:
        return csr.dst
    return ptr_to_index32(csr.rowptr, csr.src)


def edge_kinds(graph: AttentionGraph, csr: CSR) -> Tensor:
    r"""The kind of every edge in CSR order (int8, or int32 where the CSR
    build derived them: bit 0 scores it with :math:`\mathbf{a}_t`, bit 1
    masks it), from the flags of :obj:`graph`
    (:meth:`AttentionGraph.flags`)."""
    if csr.kind is not None:
        return csr.kind
    if graph.loop is None and graph.masked is None:
        # Derived in CSR order (no [E] flags in the caller's order):
        kind = (csr.src == csr_dst(csr)).to(torch.int8)
        if graph.mask_input_loops:
            # The input's self-loops (before the appended ones) are masked:
            num_input = graph.src.numel() - graph.num_loops
            kind = torch.addcmul(kind, kind, csr.perm < num_input, value=2)
        return kind
    loop, masked = graph.flags()
    kind = loop.to(torch.int8)
    if masked is not None:
        kind = kind + 2 * masked.to(torch.int8)
    return kind.index_select(0, csr.perm).contiguous()


def reverse_csr(csr: CSR, num_src: int):
    r"""The reverse CSR over the CSR positions, sorted by source, where
    :func:`csr_and_reverse` did not give it: the row pointer and the CSR
    position of every outgoing edge (int32), from a stable sort."""
    src, rev_pos = torch.sort(csr.src, stable=True)
    rev_rowptr = index_to_ptr32(src, num_src)
    return rev_rowptr, rev_pos.int()
