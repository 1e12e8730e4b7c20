r"""The forward Triton kernels: the attention, the merge of a node's
split parts, the attention weights (all, or the self-loops' alone) and the
dropout mask (:mod:`._kernels`)."""

import triton
import triton.language as tl

from ._tiles import (
    WORK_LIST,
    _edge_scores,
    _keep,
    _segment,
    _tile,
    _work_list,
)


@triton.jit(do_not_specialize=['num_dst', *WORK_LIST])
def gate_fwd_kernel(
    qs_ptr, qd_ptr, val_ptr, ep_ptr, as_ptr, at_ptr,
    src_ptr, kind_ptr, rowptr_ptr, lists_ptr, nodes_ptr,
    out_ptr, lse_ptr, part_acc_ptr, part_ml_ptr, num_dst,
    seed_ptr, p_drop, scale, slope, q_stride,
    list_first, node_first, list_width,
    H: tl.constexpr, C: tl.constexpr, H_PAD: tl.constexpr,
    C_PAD: tl.constexpr, BLOCK_E: tl.constexpr, SEG: tl.constexpr,
    HAS_EDGE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
):  # fmt: skip
    r"""One program per segment of at most :obj:`SEG` incoming edges of a
    target node (program :obj:`j` of node :obj:`seg_node[j]`; past the
    last segment, :obj:`num_dst`: nothing to do): online softmax over the
    segment in blocks of :obj:`BLOCK_E`, :math:`\sum_u \alpha_{uv} W x_u`
    summed in float32. A node of one segment gets :obj:`out[v]` and the
    log-sum-exp :obj:`lse[v]`; the segments of a split node write their
    running max, sum and accumulator to the partial slots
    :obj:`partptr[v] + k`, merged by :func:`gate_combine_kernel`."""
    if HAS_DROPOUT:  # (Loaded once, not per block of edges.)
        seed = tl.load(seed_ptr)
    segptr_ptr, seg_node_ptr, partptr_ptr = _work_list(
        lists_ptr, nodes_ptr, list_first, node_first, list_width
    )
    HC: tl.constexpr = H * C
    node, v, count, k, start, end = _segment(
        tl.program_id(0), num_dst, tl.num_programs(0), seg_node_ptr,
        segptr_ptr, rowptr_ptr, SEG,
    )  # fmt: skip
    if node >= num_dst:
        return
    h, hc, hc_mask = _tile(H, C, H_PAD, C_PAD)
    h_mask = h < H
    qd = tl.load(qd_ptr + v * q_stride + hc, mask=hc_mask, other=0.0)
    qd = qd.to(tl.float32)
    a_s = tl.load(as_ptr + hc, mask=hc_mask, other=0.0).to(tl.float32)
    a_t = tl.load(at_ptr + hc, mask=hc_mask, other=0.0).to(tl.float32)
    m_i = tl.full((H_PAD,), float('-inf'), tl.float32)
    l_i = tl.zeros((H_PAD,), tl.float32)
    acc = tl.zeros((H_PAD, C_PAD), tl.float32)
    for block in range(start, end, BLOCK_E):
        p = block + tl.arange(0, BLOCK_E)
        edge_mask = p < end
        u = tl.load(src_ptr + p, mask=edge_mask, other=0)
        kind = tl.load(kind_ptr + p, mask=edge_mask, other=2).to(tl.int32)
        z, act, att, score, valid = _edge_scores(
            qs_ptr, ep_ptr, u, p, edge_mask, kind, qd[None, :, :], a_s, a_t,
            hc, hc_mask, slope, q_stride, HC, HAS_EDGE,
        )  # fmt: skip
        score = tl.where(valid[:, None], score, float('-inf'))
        m_new = tl.maximum(m_i, tl.max(score, axis=0))
        m_safe = tl.where(m_new == float('-inf'), 0.0, m_new)
        correction = tl.exp(m_i - m_safe)
        weight = tl.exp(score - m_safe[None, :])  # 0 where masked
        l_i = l_i * correction + tl.sum(weight, axis=0)
        if HAS_DROPOUT:
            keep = _keep(seed, p, h, p_drop, H)
            weight = tl.where(keep, weight, 0.0)
        m3 = edge_mask[:, None, None] & hc_mask[None, :, :]
        val = tl.load(
            val_ptr
            + u.to(tl.int64)[:, None, None] * q_stride
            + hc[None, :, :],
            mask=m3,
            other=0.0,
        ).to(tl.float32)
        acc = acc * correction[:, None] + tl.sum(weight[:, :, None] * val, 0)
        m_i = m_new
    if count == 1:
        m_safe = tl.where(m_i == float('-inf'), 0.0, m_i)
        has = l_i > 0
        denom = tl.where(has, l_i, 1.0)
        out = acc / denom[:, None] * scale  # 0 for nodes without edges
        tl.store(out_ptr + v * HC + hc, out, mask=hc_mask)
        tl.store(lse_ptr + v * H + h, m_safe + tl.log(denom), mask=h_mask)
    else:
        slot = (tl.load(partptr_ptr + v) + k).to(tl.int64)
        tl.store(part_acc_ptr + slot * HC + hc, acc, mask=hc_mask)
        tl.store(part_ml_ptr + slot * 2 * H + h, m_i, mask=h_mask)
        tl.store(part_ml_ptr + slot * 2 * H + H + h, l_i, mask=h_mask)


@triton.jit(do_not_specialize=[*WORK_LIST])
def gate_combine_kernel(
    lists_ptr, nodes_ptr, part_acc_ptr, part_ml_ptr, out_ptr, lse_ptr,
    scale,
    list_first, node_first, list_width,
    H: tl.constexpr, C: tl.constexpr, H_PAD: tl.constexpr,
    C_PAD: tl.constexpr,
):  # fmt: skip
    r"""One program per target node: merges the partial softmax results of
    a node split into several segments, in segment order (a node of one
    segment was written by :func:`gate_fwd_kernel` itself)."""
    segptr_ptr, seg_node_ptr, partptr_ptr = _work_list(
        lists_ptr, nodes_ptr, list_first, node_first, list_width
    )
    HC: tl.constexpr = H * C
    v = tl.program_id(0).to(tl.int64)
    count = tl.load(segptr_ptr + v + 1) - tl.load(segptr_ptr + v)
    if count <= 1:
        return
    h, hc, hc_mask = _tile(H, C, H_PAD, C_PAD)
    h_mask = h < H
    base = tl.load(partptr_ptr + v).to(tl.int64)
    m = tl.full((H_PAD,), float('-inf'), tl.float32)
    for k in range(0, count):
        m_k = tl.load(
            part_ml_ptr + (base + k) * 2 * H + h, mask=h_mask,
            other=float('-inf'),
        )  # fmt: skip
        m = tl.maximum(m, m_k)
    m_safe = tl.where(m == float('-inf'), 0.0, m)
    l_i = tl.zeros((H_PAD,), tl.float32)
    acc = tl.zeros((H_PAD, C_PAD), tl.float32)
    for k in range(0, count):
        slot = base + k
        m_k = tl.load(
            part_ml_ptr + slot * 2 * H + h, mask=h_mask, other=float('-inf')
        )
        l_k = tl.load(part_ml_ptr + slot * 2 * H + H + h, mask=h_mask,
                      other=0.0)  # fmt: skip
        f = tl.exp(m_k - m_safe)
        l_i += l_k * f
        a_k = tl.load(part_acc_ptr + slot * HC + hc, mask=hc_mask, other=0.0)
        acc += a_k * f[:, None]
    has = l_i > 0
    denom = tl.where(has, l_i, 1.0)
    tl.store(out_ptr + v * HC + hc, acc / denom[:, None] * scale,
             mask=hc_mask)  # fmt: skip
    tl.store(lse_ptr + v * H + h, m_safe + tl.log(denom), mask=h_mask)


@triton.jit(do_not_specialize=['num_edges'])
def gate_alpha_kernel(
    qs_ptr, qd_ptr, ep_ptr, as_ptr, at_ptr,
    src_ptr, dst_ptr, kind_ptr, perm_ptr, lse_ptr, alpha_ptr,
    num_edges, seed_ptr, p_drop, scale, slope, q_stride,
    H: tl.constexpr, C: tl.constexpr, H_PAD: tl.constexpr,
    C_PAD: tl.constexpr, BLOCK_E: tl.constexpr,
    HAS_EDGE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
):  # fmt: skip
    r"""One program per block of edges (CSR order): the attention weights
    :math:`\exp(e_{uv} - \mathrm{lse}_v)` (after dropout), stored at the
    caller's edge order through :obj:`perm`."""
    if HAS_DROPOUT:  # (Loaded once, not per block of edges.)
        seed = tl.load(seed_ptr)
    HC: tl.constexpr = H * C
    h, hc, hc_mask = _tile(H, C, H_PAD, C_PAD)
    h_mask = h < H
    p = tl.program_id(0).to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    edge_mask = p < num_edges
    u = tl.load(src_ptr + p, mask=edge_mask, other=0)
    v = tl.load(dst_ptr + p, mask=edge_mask, other=0).to(tl.int64)
    kind = tl.load(kind_ptr + p, mask=edge_mask, other=2).to(tl.int32)
    m3 = edge_mask[:, None, None] & hc_mask[None, :, :]
    qd = tl.load(
        qd_ptr + v[:, None, None] * q_stride + hc[None, :, :],
        mask=m3,
        other=0.0,
    ).to(tl.float32)
    a_s = tl.load(as_ptr + hc, mask=hc_mask, other=0.0).to(tl.float32)
    a_t = tl.load(at_ptr + hc, mask=hc_mask, other=0.0).to(tl.float32)
    z, act, att, score, valid = _edge_scores(
        qs_ptr, ep_ptr, u, p, edge_mask, kind, qd, a_s, a_t, hc, hc_mask,
        slope, q_stride, HC, HAS_EDGE,
    )  # fmt: skip
    mh = edge_mask[:, None] & h_mask[None, :]
    lse = tl.load(lse_ptr + v[:, None] * H + h[None, :], mask=mh, other=0.0)
    alpha = tl.where(valid[:, None], tl.exp(score - lse), 0.0)
    if HAS_DROPOUT:
        keep = _keep(seed, p, h, p_drop, H)
        alpha = tl.where(keep, alpha * scale, 0.0)
    e = tl.load(perm_ptr + p, mask=edge_mask, other=0)
    tl.store(alpha_ptr + e[:, None] * H + h[None, :], alpha, mask=mh)


@triton.jit(do_not_specialize=['num_edges'])
def gate_keep_kernel(
    keep_ptr, num_edges, seed_ptr, p_drop,
    H: tl.constexpr, H_PAD: tl.constexpr, BLOCK_E: tl.constexpr,
):  # fmt: skip
    r"""The dropout mask in CSR order (for the double-backward
    fallback)."""
    seed = tl.load(seed_ptr)
    h = tl.arange(0, H_PAD)
    p = tl.program_id(0).to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    edge_mask = p < num_edges
    keep = _keep(seed, p, h, p_drop, H)
    mh = edge_mask[:, None] & (h < H)[None, :]
    tl.store(keep_ptr + p[:, None] * H + h[None, :], keep.to(tl.int8), mask=mh)


@triton.jit(do_not_specialize=['num_loops'])
def gate_loop_alpha_kernel(
    qs_ptr, qd_ptr, eloop_ptr, as_ptr, at_ptr,
    kind_ptr, rowptr_ptr, lse_ptr, alpha_ptr,
    num_loops, seed_ptr, p_drop, scale, slope, q_stride,
    H: tl.constexpr, C: tl.constexpr, H_PAD: tl.constexpr,
    C_PAD: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_EDGE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
):  # fmt: skip
    r"""The attention weights of the appended self-loops alone,
    :obj:`alpha[v] = exp(e_vv - lse_v)` :obj:`[num_loops, H]` (after
    dropout), one program per block of :obj:`BLOCK_N` nodes
    :math:`v < \text{num\_loops}`: instead of :func:`gate_alpha_kernel`'s
    :obj:`E x H`. The appended loop of :obj:`v` is the last edge of its
    CSR segment (both CSR builds put it there), :obj:`rowptr[v + 1] - 1`,
    whose kind and dropout mask it reads; its edge projection is row
    :obj:`v` of :obj:`eloop` (the last :obj:`num_loops` edges')."""
    if HAS_DROPOUT:  # (Loaded once, not per block of edges.)
        seed = tl.load(seed_ptr)
    HC: tl.constexpr = H * C
    h, hc, hc_mask = _tile(H, C, H_PAD, C_PAD)
    h_mask = h < H
    v = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    node_mask = v < num_loops
    p = tl.load(rowptr_ptr + v + 1, mask=node_mask, other=1).to(tl.int64) - 1
    kind = tl.load(kind_ptr + p, mask=node_mask, other=2).to(tl.int32)
    m3 = node_mask[:, None, None] & hc_mask[None, :, :]
    rows = v[:, None, None] * q_stride + hc[None, :, :]
    qd = tl.load(qd_ptr + rows, mask=m3, other=0.0).to(tl.float32)
    a_s = tl.load(as_ptr + hc, mask=hc_mask, other=0.0).to(tl.float32)
    a_t = tl.load(at_ptr + hc, mask=hc_mask, other=0.0).to(tl.float32)
    # `eloop` is indexed by the node (its row `v`), not by the CSR position:
    z, act, att, score, valid = _edge_scores(
        qs_ptr, eloop_ptr, v, v, node_mask, kind, qd, a_s, a_t, hc, hc_mask,
        slope, q_stride, HC, HAS_EDGE,
    )  # fmt: skip
    mh = node_mask[:, None] & h_mask[None, :]
    lse = tl.load(lse_ptr + v[:, None] * H + h[None, :], mask=mh, other=0.0)
    alpha = tl.where(valid[:, None], tl.exp(score - lse), 0.0)
    if HAS_DROPOUT:
        keep = _keep(seed, p, h, p_drop, H)
        alpha = tl.where(keep, alpha * scale, 0.0)
    tl.store(alpha_ptr + v[:, None] * H + h[None, :], alpha, mask=mh)
