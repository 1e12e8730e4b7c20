r"""The tiles, edge scores and dropout draws that the forward and
backward Triton kernels share (:mod:`._kernels`)."""

import triton
import triton.language as tl


@triton.jit
def _tile(
    H: tl.constexpr, C: tl.constexpr, H_PAD: tl.constexpr, C_PAD: tl.constexpr
):
    h = tl.arange(0, H_PAD)
    c = tl.arange(0, C_PAD)
    hc = h[:, None] * C + c[None, :]
    hc_mask = (h[:, None] < H) & (c[None, :] < C)
    return h, hc, hc_mask


@triton.jit
def _edge_scores(
    qs_ptr, ep_ptr, row, p, edge_mask, kind, qd, a_s, a_t, hc, hc_mask,
    slope, q_stride, HC: tl.constexpr, HAS_EDGE: tl.constexpr,
):  # fmt: skip
    # z = U x_u + V x_v (+ W_e e_uv) for a block of edges; `row` indexes
    # q_src ([BLOCK_E] or a scalar) by rows `q_stride` apart, `qd` is [H, C]
    # or [BLOCK_E, H, C].
    m3 = edge_mask[:, None, None] & hc_mask[None, :, :]
    offs = row.to(tl.int64)
    rows = offs[:, None, None] * q_stride + hc[None, :, :]
    z = tl.load(qs_ptr + rows, mask=m3, other=0.0).to(tl.float32)
    z = z + qd
    if HAS_EDGE:
        z += tl.load(
            ep_ptr + p.to(tl.int64)[:, None, None] * HC + hc[None, :, :],
            mask=m3,
            other=0.0,
        ).to(tl.float32)
    act = tl.where(z > 0, z, z * slope)
    is_self = ((kind & 1) == 1)[:, None, None]
    att = tl.where(is_self, a_t[None, :, :], a_s[None, :, :])
    score = tl.sum(act * att, axis=2)  # [BLOCK_E, H_PAD]
    valid = edge_mask & (kind < 2)
    return z, act, att, score, valid


@triton.jit
def _strided(H_PAD: tl.constexpr, C_PAD: tl.constexpr, s_h, s_c):
    # The offsets of an [H_PAD, C_PAD] tile of a row with strides s_h, s_c
    # (the output's gradient may be expanded: strides 0).
    h = tl.arange(0, H_PAD)
    c = tl.arange(0, C_PAD)
    return h[:, None] * s_h + c[None, :] * s_c


@triton.jit
def _keep(seed, p, h, p_drop, H: tl.constexpr):
    # The dropout mask [BLOCK_E, H_PAD] of CSR positions p and heads h, from
    # the seed that a kernel loads once from device memory
    # (`_launch._draw_seed`).
    r = tl.rand(seed, (p[:, None] * H + h[None, :]).to(tl.int32))
    return r >= p_drop


@triton.jit
def _keep_1h(seed, p, p_drop):
    # _keep of one head (h = 0, H = 1), [BLOCK_E].
    return tl.rand(seed, p.to(tl.int32)) >= p_drop


#: The offsets of a work list that every kernel taking one declares
#: :obj:`do_not_specialize` (they change with the graph).
WORK_LIST = ('list_first', 'node_first', 'list_width')


@triton.jit
def _work_list(lists_ptr, nodes_ptr, list_first, node_first, list_width):
    # A work list of segments() within its buffers: its segment pointer at
    # `list_first` of `lists`, its partial-slot pointer `list_width` past
    # it, the node of every program at `node_first` of `nodes`.
    segptr_ptr = lists_ptr + list_first
    return segptr_ptr, nodes_ptr + node_first, segptr_ptr + list_width


@triton.jit
def _segment(
    j, num_nodes, num_segments, seg_node_ptr, segptr_ptr, rowptr_ptr,
    SEG: tl.constexpr,
):  # fmt: skip
    # The node of segment `j` of a work list (`num_nodes` past the last
    # segment: the caller skips it), its segments' count, the segment's
    # rank among them and its edges [start, end) in the compressed rows.
    node = num_nodes
    if j < num_segments:
        node = tl.load(seg_node_ptr + j)
    v = tl.minimum(node, num_nodes - 1).to(tl.int64)  # a row to read
    first = tl.load(segptr_ptr + v)
    count = tl.load(segptr_ptr + v + 1) - first
    k = j - first
    start = tl.load(rowptr_ptr + v) + k * SEG
    end = tl.minimum(start + SEG, tl.load(rowptr_ptr + v + 1))
    return node, v, count, k, start, end


@triton.jit
def _store_sums(base, n, mask, sum_a, sum_b, x_s, y_s, x_t, y_t):
    # A split node's segment's six backward sums, `n` values apart: the
    # partial slot that gate_bwd_combine_kernel adds up.
    tl.store(base, sum_a, mask=mask)
    tl.store(base + n, sum_b, mask=mask)
    tl.store(base + 2 * n, x_s, mask=mask)
    tl.store(base + 3 * n, y_s, mask=mask)
    tl.store(base + 4 * n, x_t, mask=mask)
    tl.store(base + 5 * n, y_t, mask=mask)


@triton.jit
def _edge_block_1h(
    block, end, src_ptr, kind_ptr, qs_ptr, ep_ptr, qd, a_s, a_t, c, c_mask,
    slope, q_stride, C: tl.constexpr, BLOCK_E: tl.constexpr,
    HAS_EDGE: tl.constexpr,
):  # fmt: skip
    # The incoming edges of a target in CSR positions [block, min(block +
    # BLOCK_E, end)), their sources and kinds, scored (_edge_scores_1h).
    p = block + tl.arange(0, BLOCK_E)
    edge_mask = p < end
    u = tl.load(src_ptr + p, mask=edge_mask, other=0).to(tl.int64)
    kind = tl.load(kind_ptr + p, mask=edge_mask, other=2).to(tl.int32)
    z, act, att, score, valid = _edge_scores_1h(
        qs_ptr, ep_ptr, u, p, edge_mask, kind, qd[None, :], a_s, a_t, c,
        c_mask, slope, q_stride, C, HAS_EDGE,
    )  # fmt: skip
    return p, edge_mask, u, kind, z, act, att, score, valid


@triton.jit
def _edge_scores_1h(
    qs_ptr, ep_ptr, row, p, edge_mask, kind, qd, a_s, a_t, c, c_mask,
    slope, q_stride, C: tl.constexpr, HAS_EDGE: tl.constexpr,
):  # fmt: skip
    # _edge_scores for one head in [BLOCK_E, C_PAD] tiles: `row` indexes
    # the gathered side `qs_ptr` ([BLOCK_E]), `qd` is the other side's
    # [1, C_PAD] row (z is a sum: either side may be gathered).
    m2 = edge_mask[:, None] & c_mask[None, :]
    rows = row.to(tl.int64)[:, None] * q_stride + c[None, :]
    z = tl.load(qs_ptr + rows, mask=m2, other=0.0).to(tl.float32)
    z = z + qd
    if HAS_EDGE:
        z += tl.load(
            ep_ptr + p.to(tl.int64)[:, None] * C + c[None, :],
            mask=m2,
            other=0.0,
        ).to(tl.float32)
    act = tl.where(z > 0, z, z * slope)
    is_self = (kind & 1) == 1
    att = tl.where(is_self[:, None], a_t[None, :], a_s[None, :])
    score = tl.sum(act * att, axis=1)  # [BLOCK_E]
    valid = edge_mask & (kind < 2)
    return z, act, att, score, valid
