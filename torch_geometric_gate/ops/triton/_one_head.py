r"""The one-head layout of the Triton kernels (:mod:`._kernels`): the
forward and both passes of the backward for one head in
:obj:`[BLOCK_E, C_PAD]` tiles (no size-1 head axis, so a launch can give
them fewer warps) with several consecutive segments per program. They
keep the work lists, partial slots, combine kernels and record of the
:obj:`[BLOCK_E, H, C]` kernels (:mod:`._forward`, :mod:`._backward`);
:obj:`attention_kernel('triton', triton_one_head_layout=True)` selects
them."""

import triton
import triton.language as tl

from ._tiles import (
    WORK_LIST,
    _edge_block_1h,
    _edge_scores_1h,
    _keep_1h,
    _segment,
    _store_sums,
    _work_list,
)


@triton.jit(do_not_specialize=['num_dst', 'num_segments', *WORK_LIST])
def gate_fwd_1h_kernel(
    qs_ptr, qd_ptr, val_ptr, ep_ptr, as_ptr, at_ptr,
    src_ptr, kind_ptr, rowptr_ptr, lists_ptr, nodes_ptr,
    out_ptr, lse_ptr, part_acc_ptr, part_ml_ptr, num_dst, num_segments,
    seed_ptr, p_drop, scale, slope, q_stride,
    list_first, node_first, list_width,
    C: tl.constexpr, C_PAD: tl.constexpr, BLOCK_E: tl.constexpr,
    SEG: tl.constexpr, NODES: tl.constexpr,
    HAS_EDGE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
):  # fmt: skip
    r""":func:`gate_fwd_kernel` for one head in a 2-D layout: blocks of
    :obj:`[BLOCK_E, C_PAD]` edges x channels (no size-1 head axis, so the
    launch can give it fewer warps), scalar running max and sum; and
    :obj:`NODES` consecutive segments per program (low-degree nodes share
    a program). The same work list, outputs and partial slots (merged by
    :func:`gate_combine_kernel`)."""
    if HAS_DROPOUT:  # (Loaded once, not per block of edges.)
        seed = tl.load(seed_ptr)
    segptr_ptr, seg_node_ptr, partptr_ptr = _work_list(
        lists_ptr, nodes_ptr, list_first, node_first, list_width
    )
    c = tl.arange(0, C_PAD)
    c_mask = c < C
    a_s = tl.load(as_ptr + c, mask=c_mask, other=0.0).to(tl.float32)
    a_t = tl.load(at_ptr + c, mask=c_mask, other=0.0).to(tl.float32)
    for i in range(NODES):
        node, v, count, k, start, end = _segment(
            tl.program_id(0) * NODES + i, num_dst, num_segments,
            seg_node_ptr, segptr_ptr, rowptr_ptr, SEG,
        )  # fmt: skip
        if node < num_dst:
            qd = tl.load(qd_ptr + v * q_stride + c, mask=c_mask, other=0.0)
            qd = qd.to(tl.float32)
            # Scalars as reductions (0-d tensors, in every Triton 3):
            m_i = tl.max(tl.full((BLOCK_E,), float('-inf'), tl.float32), 0)
            l_i = tl.sum(tl.zeros((BLOCK_E,), tl.float32), 0)
            acc = tl.zeros((C_PAD,), tl.float32)
            for block in range(start, end, BLOCK_E):
                p, edge_mask, u, kind, z, act, att, score, valid = (
                    _edge_block_1h(
                        block, end, src_ptr, kind_ptr, qs_ptr, ep_ptr, qd,
                        a_s, a_t, c, c_mask, slope, q_stride, C, BLOCK_E,
                        HAS_EDGE,
                    )
                )  # fmt: skip
                score = tl.where(valid, score, float('-inf'))
                m_new = tl.maximum(m_i, tl.max(score, axis=0))
                m_safe = tl.where(m_new == float('-inf'), 0.0, m_new)
                correction = tl.exp(m_i - m_safe)
                weight = tl.exp(score - m_safe)  # 0 where masked
                l_i = l_i * correction + tl.sum(weight, axis=0)
                if HAS_DROPOUT:
                    keep = _keep_1h(seed, p, p_drop)
                    weight = tl.where(keep, weight, 0.0)
                m2 = edge_mask[:, None] & c_mask[None, :]
                val = tl.load(val_ptr + u[:, None] * q_stride + c[None, :],
                              mask=m2, other=0.0).to(tl.float32)  # fmt: skip
                acc = acc * correction + tl.sum(weight[:, None] * val, 0)
                m_i = m_new
            if count == 1:
                m_safe = tl.where(m_i == float('-inf'), 0.0, m_i)
                denom = tl.where(l_i > 0, l_i, 1.0)
                out = acc / denom * scale  # 0 for nodes without edges
                tl.store(out_ptr + v * C + c, out, mask=c_mask)
                tl.store(lse_ptr + v, m_safe + tl.log(denom))
            else:
                slot = (tl.load(partptr_ptr + v) + k).to(tl.int64)
                tl.store(part_acc_ptr + slot * C + c, acc, mask=c_mask)
                tl.store(part_ml_ptr + slot * 2, m_i)
                tl.store(part_ml_ptr + slot * 2 + 1, l_i)


@triton.jit(do_not_specialize=['num_dst', 'num_segments', *WORK_LIST])
def gate_bwd_dst_1h_kernel(
    qs_ptr, qd_ptr, val_ptr, ep_ptr, as_ptr, at_ptr,
    src_ptr, kind_ptr, rowptr_ptr, lists_ptr, nodes_ptr,
    lse_ptr, gout_ptr, galpha_ptr,
    dproj_ptr, delta_ptr, gatt_ptr, part_ptr, part_delta_ptr,
    rec_alpha_ptr, rec_dalpha_ptr, rec_bits_ptr,
    num_dst, num_segments, seed_ptr, p_drop, scale, slope, q_stride,
    g_v, g_c,
    list_first, node_first, list_width, dqd_first, d_stride,
    C: tl.constexpr, C_PAD: tl.constexpr, BLOCK_E: tl.constexpr,
    SEG: tl.constexpr, NODES: tl.constexpr,
    HAS_EDGE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    HAS_GALPHA: tl.constexpr, WRITE_RECORD: tl.constexpr,
):  # fmt: skip
    r""":func:`gate_bwd_dst_kernel` (and, with :obj:`WRITE_RECORD`,
    :func:`gate_bwd_dst_rec_kernel`) for one head in the layout of
    :func:`gate_fwd_1h_kernel`: :obj:`[BLOCK_E, C_PAD]` tiles, scalar
    :math:`\delta_v`, and :obj:`NODES` consecutive segments per program
    (:obj:`gatt[pid]` sums those). The same outputs, partial slots
    (:func:`gate_bwd_combine_kernel`) and record."""
    if HAS_DROPOUT:  # (Loaded once, not per block of edges.)
        seed = tl.load(seed_ptr)
    dqd_ptr = dproj_ptr + dqd_first  # (rows d_stride apart)
    segptr_ptr, seg_node_ptr, partptr_ptr = _work_list(
        lists_ptr, nodes_ptr, list_first, node_first, list_width
    )
    c = tl.arange(0, C_PAD)
    c_mask = c < C
    a_s = tl.load(as_ptr + c, mask=c_mask, other=0.0).to(tl.float32)
    a_t = tl.load(at_ptr + c, mask=c_mask, other=0.0).to(tl.float32)
    g_as = tl.zeros((C_PAD,), tl.float32)
    g_at = tl.zeros((C_PAD,), tl.float32)
    # Bit c of an edge's record: z_c > 0 (phi'(z_c) = 1, else the slope).
    bit = tl.full((C_PAD,), 1, tl.int64) << c.to(tl.int64)
    for i in range(NODES):
        node, v, count, k, start, end = _segment(
            tl.program_id(0) * NODES + i, num_dst, num_segments,
            seg_node_ptr, segptr_ptr, rowptr_ptr, SEG,
        )  # fmt: skip
        if node < num_dst:
            qd = tl.load(qd_ptr + v * q_stride + c, mask=c_mask, other=0.0)
            qd = qd.to(tl.float32)
            go = tl.load(gout_ptr + v * g_v + c * g_c, mask=c_mask, other=0.0)
            go = go.to(tl.float32)
            lse = tl.load(lse_ptr + v)
            sum_a = tl.zeros((C_PAD,), tl.float32)
            sum_b = tl.zeros((C_PAD,), tl.float32)
            x_s = tl.zeros((C_PAD,), tl.float32)
            y_s = tl.zeros((C_PAD,), tl.float32)
            x_t = tl.zeros((C_PAD,), tl.float32)
            y_t = tl.zeros((C_PAD,), tl.float32)
            # A scalar as a reduction (a 0-d tensor, in every Triton 3):
            delta = tl.sum(tl.zeros((BLOCK_E,), tl.float32), 0)
            for block in range(start, end, BLOCK_E):
                p, edge_mask, u, kind, z, act, att, score, valid = (
                    _edge_block_1h(
                        block, end, src_ptr, kind_ptr, qs_ptr, ep_ptr, qd,
                        a_s, a_t, c, c_mask, slope, q_stride, C, BLOCK_E,
                        HAS_EDGE,
                    )
                )  # fmt: skip
                is_self = (kind & 1) == 1
                alpha = tl.where(valid, tl.exp(score - lse), 0.0)
                m2 = edge_mask[:, None] & c_mask[None, :]
                val = tl.load(val_ptr + u[:, None] * q_stride + c[None, :],
                              mask=m2, other=0.0).to(tl.float32)  # fmt: skip
                d_alpha = tl.sum(go[None, :] * val, axis=1)
                if HAS_GALPHA:
                    d_alpha += tl.load(
                        galpha_ptr + p, mask=edge_mask, other=0.0
                    ).to(tl.float32)
                if HAS_DROPOUT:
                    keep = _keep_1h(seed, p, p_drop)
                    d_alpha = tl.where(keep, d_alpha * scale, 0.0)
                if WRITE_RECORD:
                    tl.store(rec_alpha_ptr + p, alpha, mask=edge_mask)
                    tl.store(rec_dalpha_ptr + p, d_alpha, mask=edge_mask)
                    signs = tl.where(z > 0, bit[None, :], 0)
                    tl.store(
                        rec_bits_ptr + p, tl.sum(signs, axis=1), edge_mask
                    )
                w1 = alpha * d_alpha
                g = att * tl.where(z > 0, 1.0, slope)
                sum_a += tl.sum(w1[:, None] * g, axis=0)
                sum_b += tl.sum(alpha[:, None] * g, axis=0)
                delta += tl.sum(w1, axis=0)
                w_t = tl.where(is_self, w1, 0.0)
                a_t_e = tl.where(is_self, alpha, 0.0)
                x_t += tl.sum(w_t[:, None] * act, 0)
                y_t += tl.sum(a_t_e[:, None] * act, 0)
                x_s += tl.sum((w1 - w_t)[:, None] * act, 0)
                y_s += tl.sum((alpha - a_t_e)[:, None] * act, 0)
            if count == 1:
                dqd = sum_a - delta * sum_b
                tl.store(dqd_ptr + v * d_stride + c, dqd, mask=c_mask)
                tl.store(delta_ptr + v, delta)
                g_as += x_s - delta * y_s
                g_at += x_t - delta * y_t
            else:
                slot = (tl.load(partptr_ptr + v) + k).to(tl.int64)
                _store_sums(
                    part_ptr + slot * 6 * C + c, C, c_mask,
                    sum_a, sum_b, x_s, y_s, x_t, y_t,
                )  # fmt: skip
                tl.store(part_delta_ptr + slot, delta)
    base = gatt_ptr + tl.program_id(0).to(tl.int64) * 2 * C + c
    tl.store(base, g_as, mask=c_mask)
    tl.store(base + C, g_at, mask=c_mask)


@triton.jit(do_not_specialize=['num_src', 'num_segments', *WORK_LIST])
def gate_bwd_src_1h_kernel(
    qs_ptr, qd_ptr, val_ptr, ep_ptr, as_ptr, at_ptr,
    dst_ptr, kind_ptr, rev_rowptr_ptr, lists_ptr, nodes_ptr,
    rev_pos_ptr, lse_ptr, gout_ptr,
    galpha_ptr, delta_ptr, dproj_ptr, dep_ptr, part_ptr,
    rec_alpha_ptr, rec_dalpha_ptr, rec_bits_ptr,
    num_src, num_segments, seed_ptr, p_drop, scale, slope, q_stride,
    g_v, g_c,
    list_first, node_first, list_width, dqs_first, dval_first,
    d_stride,
    C: tl.constexpr, C_PAD: tl.constexpr, BLOCK_E: tl.constexpr,
    SEG: tl.constexpr, NODES: tl.constexpr,
    HAS_EDGE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    HAS_GALPHA: tl.constexpr, READ_RECORD: tl.constexpr,
):  # fmt: skip
    r""":func:`gate_bwd_src_kernel` (and, with :obj:`READ_RECORD`,
    :func:`gate_bwd_src_rec_kernel`, reading the record of
    :func:`gate_bwd_dst_1h_kernel`) for one head in the layout of
    :func:`gate_fwd_1h_kernel`: :obj:`[BLOCK_E, C_PAD]` tiles and
    :obj:`NODES` consecutive segments of source nodes per program. The
    same outputs, per-edge :math:`dz_e` and partial slots
    (:func:`gate_bwd_src_combine_kernel`)."""
    if HAS_DROPOUT:  # (Loaded once, not per block of edges.)
        seed = tl.load(seed_ptr)
    dqs_ptr = dproj_ptr + dqs_first  # (rows d_stride apart)
    dval_ptr = dproj_ptr + dval_first
    segptr_ptr, seg_node_ptr, partptr_ptr = _work_list(
        lists_ptr, nodes_ptr, list_first, node_first, list_width
    )
    c = tl.arange(0, C_PAD)
    c_mask = c < C
    c64 = c.to(tl.int64)
    a_s = tl.load(as_ptr + c, mask=c_mask, other=0.0).to(tl.float32)
    a_t = tl.load(at_ptr + c, mask=c_mask, other=0.0).to(tl.float32)
    for n in range(NODES):
        node, u, count, k, start, end = _segment(
            tl.program_id(0) * NODES + n, num_src, num_segments,
            seg_node_ptr, segptr_ptr, rev_rowptr_ptr, SEG,
        )  # fmt: skip
        if node < num_src:
            if not READ_RECORD:
                qs = tl.load(qs_ptr + u * q_stride + c, mask=c_mask, other=0.0)
                qs = qs.to(tl.float32)
                val = tl.load(
                    val_ptr + u * q_stride + c, mask=c_mask, other=0.0
                )
                val = val.to(tl.float32)
            dqs = tl.zeros((C_PAD,), tl.float32)
            dval = tl.zeros((C_PAD,), tl.float32)
            for block in range(start, end, BLOCK_E):
                i = block + tl.arange(0, BLOCK_E)
                edge_mask = i < end
                p = tl.load(rev_pos_ptr + i, mask=edge_mask, other=0)
                p = p.to(tl.int64)
                v = tl.load(dst_ptr + p, mask=edge_mask, other=0)
                v = v.to(tl.int64)
                kind = tl.load(kind_ptr + p, mask=edge_mask, other=2)
                kind = kind.to(tl.int32)
                m2 = edge_mask[:, None] & c_mask[None, :]
                node2 = v[:, None] * g_v + c[None, :] * g_c
                go = tl.load(gout_ptr + node2, mask=m2, other=0.0)
                go = go.to(tl.float32)
                delta = tl.load(delta_ptr + v, mask=edge_mask, other=0.0)
                if READ_RECORD:
                    is_self = (kind & 1) == 1
                    att = tl.where(
                        is_self[:, None], a_t[None, :], a_s[None, :]
                    )
                    alpha = tl.load(rec_alpha_ptr + p, mask=edge_mask,
                                    other=0.0)  # fmt: skip
                    d_alpha = tl.load(rec_dalpha_ptr + p, mask=edge_mask,
                                      other=0.0)  # fmt: skip
                    bits = tl.load(rec_bits_ptr + p, mask=edge_mask, other=0)
                    positive = ((bits[:, None] >> c64[None, :]) & 1) == 1
                else:
                    # z = V x_v + U x_u: the targets' rows gathered, the
                    # source's row loaded once per segment.
                    z, act, att, score, valid = _edge_scores_1h(
                        qd_ptr, ep_ptr, v, p, edge_mask, kind, qs[None, :],
                        a_s, a_t, c, c_mask, slope, q_stride, C, HAS_EDGE,
                    )  # fmt: skip
                    lse = tl.load(lse_ptr + v, mask=edge_mask, other=0.0)
                    alpha = tl.where(valid, tl.exp(score - lse), 0.0)
                    d_alpha = tl.sum(go * val[None, :], axis=1)
                    if HAS_GALPHA:
                        d_alpha += tl.load(
                            galpha_ptr + p, mask=edge_mask, other=0.0
                        ).to(tl.float32)
                    positive = z > 0
                kept = alpha
                if HAS_DROPOUT:
                    keep = _keep_1h(seed, p, p_drop)
                    if not READ_RECORD:  # (the record's is after dropout)
                        d_alpha = tl.where(keep, d_alpha * scale, 0.0)
                    kept = tl.where(keep, alpha * scale, 0.0)
                ds = alpha * (d_alpha - delta)
                dz = ds[:, None] * att * tl.where(positive, 1.0, slope)
                dqs += tl.sum(dz, axis=0)
                dval += tl.sum(kept[:, None] * go, axis=0)
                if HAS_EDGE:
                    tl.store(dep_ptr + p[:, None] * C + c[None, :], dz, m2)
            if count == 1:
                tl.store(dqs_ptr + u * d_stride + c, dqs, mask=c_mask)
                tl.store(dval_ptr + u * d_stride + c, dval, mask=c_mask)
            else:
                slot = (tl.load(partptr_ptr + u) + k).to(tl.int64)
                tl.store(part_ptr + slot * 2 * C + c, dqs, mask=c_mask)
                tl.store(part_ptr + slot * 2 * C + C + c, dval, mask=c_mask)
