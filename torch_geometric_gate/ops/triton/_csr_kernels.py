r"""The Triton kernels that finish the CSR and the reverse CSR of a plain
edge index from its one stable sort (:func:`~torch_geometric_gate.ops.triton.
_csr.csr_and_reverse`): a launch or two where the ATen operations were
about fifteen (issue 48, the host floor)."""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=['num_edges', 'num_dst', 'num_src'])
def gate_csr_kernel(
    keys_ptr, order_ptr, src_ptr, ptr_ptr,
    dst_out_ptr, perm_out_ptr, src_out_ptr, rowptr_ptr, rev_rowptr_ptr,
    kind_ptr, num_edges, num_dst, num_src, num_input, src_stride,
    BLOCK: tl.constexpr, KINDS: tl.constexpr,
):  # fmt: skip
    r"""From the :obj:`2 E` sorted keys (the targets, then the sources
    shifted past them), their order and the pointer over both: at every CSR
    position :obj:`p < E` its target, edge and source (int32); the row
    pointer (the targets' part of the pointer) and the reverse row pointer
    (the sources' part, less :obj:`E`); and, in
    the free second half of :obj:`keys`, the CSR position of every edge
    (:obj:`keys[E + e] = p`), which :func:`gate_rev_pos_kernel` reads.
    :obj:`src` (the sources in the caller's edge order) may be strided.
    With :obj:`KINDS`, also the kind of every CSR position
    (:func:`~torch_geometric_gate.ops.triton._csr.edge_kinds`): a self-loop
    is scored with :math:`\mathbf{a}_t` and masked if its edge is one of
    the first :obj:`num_input`."""
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = p < num_edges
    dst = tl.load(keys_ptr + p, mask=m, other=0)
    e = tl.load(order_ptr + p, mask=m, other=0)
    src = tl.load(src_ptr + e * src_stride, mask=m, other=0)
    tl.store(dst_out_ptr + p, dst.to(tl.int32), mask=m)
    tl.store(perm_out_ptr + p, e.to(tl.int32), mask=m)
    tl.store(src_out_ptr + p, src.to(tl.int32), mask=m)
    tl.store(keys_ptr + num_edges + e, p.to(tl.int64), mask=m)
    if KINDS:  # Self-loops scored with a_t; those of the input masked.
        loop = (src == dst).to(tl.int32)
        tl.store(kind_ptr + p, loop + 2 * loop * (e < num_input), mask=m)
    r = p < num_dst + 1
    tl.store(rowptr_ptr + p, tl.load(ptr_ptr + p, mask=r, other=0), mask=r)
    r = p < num_src + 1
    rev = tl.load(ptr_ptr + num_dst + p, mask=r, other=0) - num_edges
    tl.store(rev_rowptr_ptr + p, rev, mask=r)


@triton.jit(do_not_specialize=['num_edges'])
def gate_rev_pos_kernel(
    keys_ptr, order_ptr, rev_pos_ptr, num_edges, BLOCK: tl.constexpr
):
    r"""The reverse CSR's positions: at every position :obj:`i` of the
    sources' sorted half, the CSR position of its edge (written by
    :func:`gate_csr_kernel` into :obj:`keys[E + e]`)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < num_edges
    e = tl.load(order_ptr + num_edges + i, mask=m, other=0) - num_edges
    pos = tl.load(keys_ptr + num_edges + e, mask=m, other=0)
    tl.store(rev_pos_ptr + i, pos.to(tl.int32), mask=m)


@triton.jit(do_not_specialize=['num', 'num_values', 'num_loops'])
def gate_merge_loops_kernel(
    ptr_ptr, node_ptr, values_ptr, loop_values_ptr, new_ptr_ptr, out_ptr,
    num, num_values, num_loops, BLOCK: tl.constexpr,
    VALUES_ARANGE: tl.constexpr, LOOPS_ARANGE: tl.constexpr,
):  # fmt: skip
    r"""Appends the self-loop of node :obj:`i < num_loops` at the end of
    node :obj:`i`'s segment of a compressed array (the pointer :obj:`ptr`
    over :obj:`num` nodes, the node and the value at every position),
    without a sort: every position moves ahead by the loops of the nodes
    before it, :obj:`min(node, num_loops)`, and the loop of node :obj:`i`
    lands just before its new segment's end, :obj:`ptr[i + 1] + i`. Writes
    the new pointer (int32) and values. :obj:`VALUES_ARANGE`: the values
    are the positions; :obj:`LOOPS_ARANGE`: the loops' values are
    :obj:`num_values + i`."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    r = i <= num
    ptr = tl.load(ptr_ptr + i, mask=r, other=0)
    ahead = tl.minimum(i, num_loops)
    tl.store(new_ptr_ptr + i, (ptr + ahead).to(tl.int32), mask=r)
    m = i < num_values
    node = tl.load(node_ptr + i, mask=m, other=0)
    if VALUES_ARANGE:
        value = i
    else:
        value = tl.load(values_ptr + i, mask=m, other=0)
    to = i + tl.minimum(node, num_loops)
    tl.store(out_ptr + to, value.to(out_ptr.dtype.element_ty), mask=m)
    m = i < num_loops
    end = tl.load(ptr_ptr + i + 1, mask=m, other=0)
    if LOOPS_ARANGE:
        value = num_values + i
    else:
        value = tl.load(loop_values_ptr + i, mask=m, other=0)
    tl.store(out_ptr + end + i, value.to(out_ptr.dtype.element_ty), mask=m)
