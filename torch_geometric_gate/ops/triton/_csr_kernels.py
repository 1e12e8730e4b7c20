r"""The Triton kernels that finish what the attention kernels walk: the
CSR and the reverse CSR
(:func:`~torch_geometric_gate.ops.triton._csr.csr_and_reverse`) of a plain
edge index from its one stable sort, or of a sorted
:class:`~torch_geometric.EdgeIndex` from its cached CSC and CSR with the
appended self-loops merged in; and the work lists of nodes split into
segments (:func:`~torch_geometric_gate.ops.triton._csr.segments`): a
launch or two where the ATen operations were about fifteen (issue 48, the
host floor)."""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=['num_edges', 'num_dst', 'num_src', 'steps'])
def gate_csr_kernel(
    sorted_ptr, order_ptr, src_ptr,
    dst_out_ptr, perm_out_ptr, src_out_ptr, pos_ptr, rowptr_ptr,
    rev_rowptr_ptr, kind_ptr, num_edges, num_dst, num_src, num_input,
    src_stride, steps, BLOCK: tl.constexpr, KINDS: tl.constexpr,
):  # fmt: skip
    r"""From the row-wise stable sort of the :obj:`[2, E]` edge index
    (:obj:`sorted`: the sources, then the targets, each row sorted;
    :obj:`order`: the edge at every sorted position): at every CSR position
    :obj:`p < E` (the targets' row) its target, edge and source (int32),
    and the CSR position of every edge (:obj:`pos[e] = p`, which
    :func:`gate_rev_pos_kernel` reads); the row pointer and the reverse
    row pointer by a binary search of each sorted row (:obj:`steps`: the
    bit length of :obj:`E`). :obj:`src` (the sources in the caller's edge
    order) may be strided. With :obj:`KINDS`, also the kind of every CSR
    position (:func:`~torch_geometric_gate.ops.triton._csr.edge_kinds`): a
    self-loop is scored with :math:`\mathbf{a}_t` and masked if its edge is
    one of the first :obj:`num_input`."""
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = p < num_edges
    dst = tl.load(sorted_ptr + num_edges + p, mask=m, other=0)
    e = tl.load(order_ptr + num_edges + p, mask=m, other=0)
    src = tl.load(src_ptr + e * src_stride, mask=m, other=0)
    tl.store(dst_out_ptr + p, dst.to(tl.int32), mask=m)
    tl.store(perm_out_ptr + p, e.to(tl.int32), mask=m)
    tl.store(src_out_ptr + p, src.to(tl.int32), mask=m)
    tl.store(pos_ptr + e, p.to(tl.int32), mask=m)
    if KINDS:  # Self-loops scored with a_t; those of the input masked.
        tl.store(kind_ptr + p, _kind(src, dst, e, num_input), mask=m)
    node = p.to(tl.int64)
    r = p < num_dst + 1
    ptr = _lower_bound(sorted_ptr + num_edges, num_edges, node, steps)
    tl.store(rowptr_ptr + p, ptr.to(tl.int32), mask=r)
    r = p < num_src + 1
    ptr = _lower_bound(sorted_ptr, num_edges, node, steps)
    tl.store(rev_rowptr_ptr + p, ptr.to(tl.int32), mask=r)


@triton.jit
def _lower_bound(sorted_ptr, n, value, steps):
    # The first position of the sorted sorted[:n] whose entry is at least
    # `value` (n where none), for every lane; `steps` halvings (the bit
    # length of n) empty every interval.
    lo = tl.zeros_like(value)
    hi = lo + n
    for _ in range(steps):
        open_ = lo < hi
        mid = (lo + hi) // 2
        below = tl.load(sorted_ptr + mid, mask=open_, other=0) < value
        lo = tl.where(open_ & below, mid + 1, lo)
        hi = tl.where(open_ & ~below, mid, hi)
    return lo


@triton.jit(do_not_specialize=['num_edges'])
def gate_rev_pos_kernel(
    order_ptr, pos_ptr, rev_pos_ptr, num_edges, BLOCK: tl.constexpr
):
    r"""The reverse CSR's positions: at every position :obj:`i` of the
    sorted sources (the first row of :obj:`order`), the CSR position of its
    edge (written by :func:`gate_csr_kernel` into :obj:`pos`)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < num_edges
    e = tl.load(order_ptr + i, mask=m, other=0)
    tl.store(rev_pos_ptr + i, tl.load(pos_ptr + e, mask=m, other=0), mask=m)


@triton.jit(
    do_not_specialize=['num_dst', 'num_input', 'num_loops', 'num_masked']
)
def gate_merge_csr_kernel(
    colptr_ptr, perm0_ptr, src_ptr, dst_ptr,
    rowptr_ptr, perm_ptr, src_out_ptr, dst_out_ptr, kind_ptr, pos_ptr,
    num_dst, num_input, num_loops, num_masked, src_stride, dst_stride,
    BLOCK: tl.constexpr, BY_COL: tl.constexpr, KINDS: tl.constexpr,
    POSITIONS: tl.constexpr,
):  # fmt: skip
    r"""The CSR of a sorted :class:`~torch_geometric.EdgeIndex`'s cached
    CSC (:obj:`colptr`, and :obj:`perm0` the edge at every CSC position,
    or the identity where :obj:`BY_COL`) with the appended self-loops
    merged in, without a sort: the loop of node :obj:`i < num_loops` (edge
    :obj:`num_input + i`) lands at the end of its row, :obj:`colptr[i + 1]
    + i`, and every other position moves ahead by the loops of the nodes
    before it, :obj:`min(node, num_loops)`. Writes the row pointer and, at
    every CSR position, its edge, source and target (int32); with
    :obj:`KINDS` its kind (a self-loop masked where its edge is one of the
    first :obj:`num_masked`); with :obj:`POSITIONS` the CSR position of
    every edge (for :func:`gate_merge_rev_kernel`). :obj:`src` and
    :obj:`dst` (the caller's edge order) may be strided."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    e, m = _merged_ptr(
        colptr_ptr, rowptr_ptr, perm0_ptr, i, num_dst, num_input, num_loops,
        BY_COL,
    )  # fmt: skip
    d = tl.load(dst_ptr + e * dst_stride, mask=m, other=0)
    to = i + tl.minimum(d, num_loops)
    _put_edge(
        e, to, m, src_ptr, dst_ptr, perm_ptr, src_out_ptr, dst_out_ptr,
        kind_ptr, pos_ptr, num_masked, src_stride, dst_stride, KINDS,
        POSITIONS,
    )  # fmt: skip
    to, m = _loop_position(colptr_ptr, i, num_loops)
    _put_edge(
        num_input + i.to(tl.int64), to, m, src_ptr, dst_ptr, perm_ptr,
        src_out_ptr, dst_out_ptr, kind_ptr, pos_ptr, num_masked,
        src_stride, dst_stride, KINDS, POSITIONS,
    )  # fmt: skip


@triton.jit
def _merged_ptr(
    ptr_ptr, new_ptr_ptr, order_ptr, i, num, num_input, num_loops,
    IDENTITY: tl.constexpr,
):  # fmt: skip
    # The compressed pointer over `num` nodes with the appended self-loops
    # merged in (each entry moves ahead by the loops of the nodes before
    # it), written; and the edge at every input position `i` (the identity
    # or `order[i]`), with the mask of those positions.
    r = i <= num
    ptr = tl.load(ptr_ptr + i, mask=r, other=0)
    new_ptr = ptr + tl.minimum(i, num_loops)
    tl.store(new_ptr_ptr + i, new_ptr.to(tl.int32), mask=r)
    m = i < num_input
    if IDENTITY:
        e = i.to(tl.int64)
    else:
        e = tl.load(order_ptr + i, mask=m, other=0).to(tl.int64)
    return e, m


@triton.jit
def _loop_position(ptr_ptr, i, num_loops):
    # Where the loop of node `i < num_loops` lands: the end of its merged
    # row, `ptr[i + 1] + i`.
    m = i < num_loops
    return tl.load(ptr_ptr + i + 1, mask=m, other=0) + i, m


@triton.jit
def _put_edge(
    e, to, m, src_ptr, dst_ptr, perm_ptr, src_out_ptr, dst_out_ptr,
    kind_ptr, pos_ptr, num_masked, src_stride, dst_stride,
    KINDS: tl.constexpr, POSITIONS: tl.constexpr,
):  # fmt: skip
    # Edge `e` at CSR position `to`: its edge, source, target (and kind).
    s = tl.load(src_ptr + e * src_stride, mask=m, other=0)
    d = tl.load(dst_ptr + e * dst_stride, mask=m, other=0)
    tl.store(perm_ptr + to, e.to(tl.int32), mask=m)
    tl.store(src_out_ptr + to, s.to(tl.int32), mask=m)
    tl.store(dst_out_ptr + to, d.to(tl.int32), mask=m)
    if KINDS:
        tl.store(kind_ptr + to, _kind(s, d, e, num_masked), mask=m)
    if POSITIONS:
        tl.store(pos_ptr + e, to.to(tl.int32), mask=m)


@triton.jit
def _kind(src, dst, e, num_masked):
    # The kind of edge `e` (edge_kinds): a self-loop is scored with a_t,
    # and masked where it is one of the first `num_masked` edges.
    loop = (src == dst).to(tl.int32)
    return loop + 2 * loop * (e < num_masked)


@triton.jit(do_not_specialize=['num_src', 'num_input', 'num_loops'])
def gate_merge_rev_kernel(
    rowptr0_ptr, perm_t_ptr, src_ptr, pos_ptr, rev_rowptr_ptr, rev_pos_ptr,
    num_src, num_input, num_loops, src_stride,
    BLOCK: tl.constexpr, BY_ROW: tl.constexpr,
):  # fmt: skip
    r"""The reverse CSR of a sorted :class:`~torch_geometric.EdgeIndex`
    from its cached CSR (:obj:`rowptr0`, and :obj:`perm_t` the edge at
    every position, or the identity where :obj:`BY_ROW`), the appended
    self-loops merged in as :func:`gate_merge_csr_kernel` merges them: the
    row pointer and, at every position, the CSR position of its edge
    (:obj:`pos`, written by :func:`gate_merge_csr_kernel`)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    e, m = _merged_ptr(
        rowptr0_ptr, rev_rowptr_ptr, perm_t_ptr, i, num_src, num_input,
        num_loops, BY_ROW,
    )  # fmt: skip
    u = tl.load(src_ptr + e * src_stride, mask=m, other=0)
    pos = tl.load(pos_ptr + e, mask=m, other=0)
    tl.store(rev_pos_ptr + i + tl.minimum(u, num_loops), pos, mask=m)
    to, m = _loop_position(rowptr0_ptr, i, num_loops)
    pos = tl.load(pos_ptr + num_input + i, mask=m, other=0)
    tl.store(rev_pos_ptr + to, pos, mask=m)


@triton.jit(do_not_specialize=['num', 'num2', 'width', 'seg'])
def gate_seg_count_kernel(
    rowptr_ptr, rowptr2_ptr, counts_ptr, num, num2, width, seg,
    BLOCK: tl.constexpr,
):  # fmt: skip
    r"""The first step of the work lists
    (:func:`~torch_geometric_gate.ops.triton._csr.segments`) of one or two
    row pointers (:obj:`rowptr` over :obj:`num` nodes, program axis 1
    :obj:`0`; :obj:`rowptr2` over :obj:`num2`, :obj:`1`): into rows
    :obj:`2 l` and :obj:`2 l + 1` of :obj:`counts [2 L, width]`, after a
    leading zero, every node's number of segments of at most :obj:`seg`
    edges (at least one) and, for a node of several, that number again
    (else zero; zeros past the list's nodes): their prefix sums are the
    first segment and the first partial slot of every node."""
    lst = tl.program_id(1)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if lst == 0:
        ptr = rowptr_ptr
        n = num
    else:
        ptr = rowptr2_ptr
        n = num2
    has = (i > 0) & (i <= n)
    deg = tl.load(ptr + i, mask=has, other=0) - tl.load(
        ptr + i - 1, mask=has, other=0
    )
    count = tl.where(has, tl.maximum((deg + seg - 1) // seg, 1), 0)
    split = tl.where(count > 1, count, 0)
    r = i < width
    base = counts_ptr + lst * 2 * width
    tl.store(base + i, count.to(tl.int32), mask=r)
    tl.store(base + width + i, split.to(tl.int32), mask=r)


@triton.jit(do_not_specialize=['num', 'num2', 'grid', 'grid2', 'width'])
def gate_seg_node_kernel(
    ptrs_ptr, seg_node_ptr, num, num2, grid, grid2, width,
    BLOCK: tl.constexpr,
):  # fmt: skip
    r"""The last step of the work lists: from the prefix sums :obj:`ptrs
    [2 L, width]` of :func:`gate_seg_count_kernel`'s counts, the node of
    every segment (:obj:`seg_node[segptr[v] + k] = v`) and :obj:`num` for
    the programs of the grid past the last segment; list :obj:`1`'s
    (:obj:`num2` nodes, :obj:`grid2` programs) after list :obj:`0`'s
    :obj:`grid`."""
    lst = tl.program_id(1)
    n = tl.where(lst == 0, num, num2)
    last = tl.where(lst == 0, grid, grid2)
    segptr_ptr = ptrs_ptr + lst * 2 * width
    out_ptr = seg_node_ptr + lst * grid
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    first = tl.load(segptr_ptr + i, mask=m, other=0)
    count = tl.load(segptr_ptr + i + 1, mask=m, other=0) - first
    for k in range(0, tl.max(count, axis=0)):
        tl.store(out_ptr + first + k, i, mask=m & (k < count))
    rest = tl.load(segptr_ptr + n) + i
    tl.store(out_ptr + rest, n, mask=rest < last)
