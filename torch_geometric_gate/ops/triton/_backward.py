r"""The backward Triton kernels: the target-side pass (scores and the
gradients of the target side), its merge, the sum of its attention-vector
gradients, the source-side pass and its merge, recomputing or reading a
per-edge record (:mod:`._kernels`)."""

import triton
import triton.language as tl

from ._tiles import (
    WORK_LIST,
    _edge_scores,
    _keep,
    _segment,
    _store_sums,
    _strided,
    _tile,
    _work_list,
)


@triton.jit
def _bwd_dst(
    qs_ptr, qd_ptr, val_ptr, ep_ptr, as_ptr, at_ptr,
    src_ptr, kind_ptr, rowptr_ptr, segptr_ptr, seg_node_ptr, partptr_ptr,
    lse_ptr, gout_ptr, galpha_ptr,
    dqd_ptr, delta_ptr, gatt_ptr, part_ptr, part_delta_ptr,
    num_dst, num_segments, seed_ptr, p_drop, scale, slope, q_stride,
    g_v, g_h, g_c, d_stride,
    H: tl.constexpr, C: tl.constexpr, H_PAD: tl.constexpr,
    C_PAD: tl.constexpr, BLOCK_E: tl.constexpr, SEG: tl.constexpr,
    HAS_EDGE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    HAS_GALPHA: tl.constexpr,
    rec_alpha_ptr, rec_dalpha_ptr, rec_bits_ptr,
    WRITE_RECORD: tl.constexpr,
):  # fmt: skip
    # The body of gate_bwd_dst_kernel and gate_bwd_dst_rec_kernel.
    if HAS_DROPOUT:  # (Loaded once, not per block of edges.)
        seed = tl.load(seed_ptr)
    HC: tl.constexpr = H * C
    pid = tl.program_id(0)
    h, hc, hc_mask = _tile(H, C, H_PAD, C_PAD)
    h_mask = h < H
    g_hc = _strided(H_PAD, C_PAD, g_h, g_c)
    a_s = tl.load(as_ptr + hc, mask=hc_mask, other=0.0).to(tl.float32)
    a_t = tl.load(at_ptr + hc, mask=hc_mask, other=0.0).to(tl.float32)
    g_as = tl.zeros((H_PAD, C_PAD), tl.float32)
    g_at = tl.zeros((H_PAD, C_PAD), tl.float32)
    # Bit c of an edge's record: z_c > 0 (phi'(z_c) = 1, else the slope).
    bit = tl.full((C_PAD,), 1, tl.int64) << tl.arange(0, C_PAD).to(tl.int64)
    for j in range(pid, num_segments, tl.num_programs(0)):
        node, v, count, k, start, end = _segment(
            j, num_dst, num_segments, seg_node_ptr, segptr_ptr, rowptr_ptr,
            SEG,
        )  # fmt: skip
        if node < num_dst:
            qd = tl.load(qd_ptr + v * q_stride + hc, mask=hc_mask, other=0.0)
            qd = qd.to(tl.float32)
            go = tl.load(gout_ptr + v * g_v + g_hc, mask=hc_mask, other=0.0)
            go = go.to(tl.float32)
            lse = tl.load(lse_ptr + v * H + h, mask=h_mask, other=0.0)
            sum_a = tl.zeros((H_PAD, C_PAD), tl.float32)
            sum_b = tl.zeros((H_PAD, C_PAD), tl.float32)
            delta = tl.zeros((H_PAD,), tl.float32)
            x_s = tl.zeros((H_PAD, C_PAD), tl.float32)
            y_s = tl.zeros((H_PAD, C_PAD), tl.float32)
            x_t = tl.zeros((H_PAD, C_PAD), tl.float32)
            y_t = tl.zeros((H_PAD, C_PAD), tl.float32)
            for block in range(start, end, BLOCK_E):
                p = block + tl.arange(0, BLOCK_E)
                edge_mask = p < end
                u = tl.load(src_ptr + p, mask=edge_mask, other=0)
                kind = tl.load(kind_ptr + p, mask=edge_mask, other=2)
                kind = kind.to(tl.int32)
                z, act, att, score, valid = _edge_scores(
                    qs_ptr, ep_ptr, u, p, edge_mask, kind, qd[None, :, :],
                    a_s, a_t, hc, hc_mask, slope, q_stride, HC, HAS_EDGE,
                )  # fmt: skip
                alpha = tl.where(
                    valid[:, None], tl.exp(score - lse[None, :]), 0.0
                )
                m3 = edge_mask[:, None, None] & hc_mask[None, :, :]
                rows = u.to(tl.int64)[:, None, None] * q_stride
                rows = rows + hc[None, :, :]
                val = tl.load(val_ptr + rows, mask=m3, other=0.0)
                val = val.to(tl.float32)
                d_alpha = tl.sum(go[None, :, :] * val, axis=2)
                mh = edge_mask[:, None] & h_mask[None, :]
                if HAS_GALPHA:
                    d_alpha += tl.load(
                        galpha_ptr + p.to(tl.int64)[:, None] * H + h[None, :],
                        mask=mh,
                        other=0.0,
                    ).to(tl.float32)
                if HAS_DROPOUT:
                    keep = _keep(seed, p, h, p_drop, H)
                    d_alpha = tl.where(keep, d_alpha * scale, 0.0)
                if WRITE_RECORD:
                    rec = p.to(tl.int64)[:, None] * H + h[None, :]
                    tl.store(rec_alpha_ptr + rec, alpha, mask=mh)
                    tl.store(rec_dalpha_ptr + rec, d_alpha, mask=mh)
                    signs = tl.where(z > 0, bit[None, None, :], 0)
                    tl.store(rec_bits_ptr + rec, tl.sum(signs, axis=2), mh)
                w1 = alpha * d_alpha
                g = att * tl.where(z > 0, 1.0, slope)
                sum_a += tl.sum(w1[:, :, None] * g, axis=0)
                sum_b += tl.sum(alpha[:, :, None] * g, axis=0)
                delta += tl.sum(w1, axis=0)
                is_self = ((kind & 1) == 1)[:, None]
                w_t = tl.where(is_self, w1, 0.0)
                a_t_e = tl.where(is_self, alpha, 0.0)
                x_t += tl.sum(w_t[:, :, None] * act, 0)
                y_t += tl.sum(a_t_e[:, :, None] * act, 0)
                x_s += tl.sum((w1 - w_t)[:, :, None] * act, 0)
                y_s += tl.sum((alpha - a_t_e)[:, :, None] * act, 0)
            if count == 1:
                dqd = sum_a - delta[:, None] * sum_b
                tl.store(dqd_ptr + v * d_stride + hc, dqd, mask=hc_mask)
                tl.store(delta_ptr + v * H + h, delta, mask=h_mask)
                g_as += x_s - delta[:, None] * y_s
                g_at += x_t - delta[:, None] * y_t
            else:
                slot = (tl.load(partptr_ptr + v) + k).to(tl.int64)
                _store_sums(
                    part_ptr + slot * 6 * HC + hc, HC, hc_mask,
                    sum_a, sum_b, x_s, y_s, x_t, y_t,
                )  # fmt: skip
                tl.store(part_delta_ptr + slot * H + h, delta, mask=h_mask)
    base = gatt_ptr + pid.to(tl.int64) * 2 * HC
    tl.store(base + hc, g_as, mask=hc_mask)
    tl.store(base + HC + hc, g_at, mask=hc_mask)


@triton.jit(do_not_specialize=['num_dst', 'num_segments', *WORK_LIST])
def gate_bwd_dst_kernel(
    qs_ptr, qd_ptr, val_ptr, ep_ptr, as_ptr, at_ptr,
    src_ptr, kind_ptr, rowptr_ptr, lists_ptr, nodes_ptr,
    lse_ptr, gout_ptr, galpha_ptr,
    dproj_ptr, delta_ptr, gatt_ptr, part_ptr, part_delta_ptr,
    num_dst, num_segments, seed_ptr, p_drop, scale, slope, q_stride,
    g_v, g_h, g_c,
    list_first, node_first, list_width, dqd_first, d_stride,
    H: tl.constexpr, C: tl.constexpr, H_PAD: tl.constexpr,
    C_PAD: tl.constexpr, BLOCK_E: tl.constexpr, SEG: tl.constexpr,
    HAS_EDGE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    HAS_GALPHA: tl.constexpr,
):  # fmt: skip
    r"""Backward, pass 1: programs stride over the segments of the target
    nodes (as :func:`gate_fwd_kernel` splits them). With
    :math:`d\alpha_e` the gradient of the (pre-dropout) attention weight,
    :math:`\delta_v = \sum_e \alpha_e d\alpha_e` and :math:`g_e =
    \mathbf{a}_e \odot \phi'(z_e)`, the score gradient is
    :math:`ds_e = \alpha_e (d\alpha_e - \delta_v)`, so

    * :math:`dV x_v = \sum_e \alpha_e d\alpha_e g_e - \delta_v \sum_e
      \alpha_e g_e` (one pass over the edges, no second loop),
    * :math:`d\mathbf{a}_k` likewise with :math:`\phi(z_e)` for the edges
      of kind :math:`k`, summed over this program's nodes into
      :obj:`gatt[pid]` (summed by :func:`gate_att_grad_kernel`:
      deterministic, no atomics).

    A node of one segment gets :obj:`dqd[v]` and :obj:`delta[v]` for pass
    2; the segments of a split node write their sums to the partial slots
    :obj:`partptr[v] + k`, finished by :func:`gate_bwd_combine_kernel`."""
    dqd_ptr = dproj_ptr + dqd_first  # (rows d_stride apart)
    segptr_ptr, seg_node_ptr, partptr_ptr = _work_list(
        lists_ptr, nodes_ptr, list_first, node_first, list_width
    )
    _bwd_dst(
        qs_ptr, qd_ptr, val_ptr, ep_ptr, as_ptr, at_ptr,
        src_ptr, kind_ptr, rowptr_ptr, segptr_ptr, seg_node_ptr, partptr_ptr,
        lse_ptr, gout_ptr, galpha_ptr,
        dqd_ptr, delta_ptr, gatt_ptr, part_ptr, part_delta_ptr,
        num_dst, num_segments, seed_ptr, p_drop, scale, slope, q_stride,
        g_v, g_h, g_c, d_stride,
        H, C, H_PAD, C_PAD, BLOCK_E, SEG, HAS_EDGE, HAS_DROPOUT, HAS_GALPHA,
        lse_ptr, lse_ptr, lse_ptr, False,
    )  # fmt: skip


@triton.jit(do_not_specialize=['num_dst', 'num_segments', *WORK_LIST])
def gate_bwd_dst_rec_kernel(
    qs_ptr, qd_ptr, val_ptr, ep_ptr, as_ptr, at_ptr,
    src_ptr, kind_ptr, rowptr_ptr, lists_ptr, nodes_ptr,
    lse_ptr, gout_ptr, galpha_ptr,
    dproj_ptr, delta_ptr, gatt_ptr, part_ptr, part_delta_ptr,
    rec_alpha_ptr, rec_dalpha_ptr, rec_bits_ptr,
    num_dst, num_segments, seed_ptr, p_drop, scale, slope, q_stride,
    g_v, g_h, g_c,
    list_first, node_first, list_width, dqd_first, d_stride,
    H: tl.constexpr, C: tl.constexpr, H_PAD: tl.constexpr,
    C_PAD: tl.constexpr, BLOCK_E: tl.constexpr, SEG: tl.constexpr,
    HAS_EDGE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    HAS_GALPHA: tl.constexpr,
):  # fmt: skip
    r""":func:`gate_bwd_dst_kernel` that also writes, per edge and head at
    its CSR position, the record that :func:`gate_bwd_src_rec_kernel`
    reads instead of recomputing: the softmax weight :math:`\alpha_e`, the
    weight's gradient :math:`d\alpha_e` (after dropout) in float32, and the
    signs of :math:`z_e` as bits of an int64 (channel :obj:`c`: bit
    :obj:`c`; :obj:`C_PAD <= 64`): 16 bytes per edge and head."""
    dqd_ptr = dproj_ptr + dqd_first  # (rows d_stride apart)
    segptr_ptr, seg_node_ptr, partptr_ptr = _work_list(
        lists_ptr, nodes_ptr, list_first, node_first, list_width
    )
    _bwd_dst(
        qs_ptr, qd_ptr, val_ptr, ep_ptr, as_ptr, at_ptr,
        src_ptr, kind_ptr, rowptr_ptr, segptr_ptr, seg_node_ptr, partptr_ptr,
        lse_ptr, gout_ptr, galpha_ptr,
        dqd_ptr, delta_ptr, gatt_ptr, part_ptr, part_delta_ptr,
        num_dst, num_segments, seed_ptr, p_drop, scale, slope, q_stride,
        g_v, g_h, g_c, d_stride,
        H, C, H_PAD, C_PAD, BLOCK_E, SEG, HAS_EDGE, HAS_DROPOUT, HAS_GALPHA,
        rec_alpha_ptr, rec_dalpha_ptr, rec_bits_ptr, True,
    )  # fmt: skip


@triton.jit(do_not_specialize=['num_dst', 'gatt_first', *WORK_LIST])
def gate_bwd_combine_kernel(
    lists_ptr, nodes_ptr, part_ptr, part_delta_ptr,
    dproj_ptr, delta_ptr, gatt_ptr, gatt_first, num_dst,
    list_first, node_first, list_width, dqd_first, d_stride,
    H: tl.constexpr, C: tl.constexpr, H_PAD: tl.constexpr,
    C_PAD: tl.constexpr,
):  # fmt: skip
    r"""Backward, pass 1 for the split nodes: programs stride over the
    target nodes, sum the partial slots of a node of several segments in
    segment order, and finish it as :func:`gate_bwd_dst_kernel` finishes a
    node of one segment (its attention-vector gradients into
    :obj:`gatt[gatt_first + pid]`)."""
    dqd_ptr = dproj_ptr + dqd_first  # (rows d_stride apart)
    segptr_ptr, seg_node_ptr, partptr_ptr = _work_list(
        lists_ptr, nodes_ptr, list_first, node_first, list_width
    )
    HC: tl.constexpr = H * C
    pid = tl.program_id(0)
    h, hc, hc_mask = _tile(H, C, H_PAD, C_PAD)
    h_mask = h < H
    g_as = tl.zeros((H_PAD, C_PAD), tl.float32)
    g_at = tl.zeros((H_PAD, C_PAD), tl.float32)
    for node in range(pid, num_dst, tl.num_programs(0)):
        v = tl.cast(node, tl.int64)
        count = tl.load(segptr_ptr + v + 1) - tl.load(segptr_ptr + v)
        if count > 1:
            first = tl.load(partptr_ptr + v).to(tl.int64)
            sum_a = tl.zeros((H_PAD, C_PAD), tl.float32)
            sum_b = tl.zeros((H_PAD, C_PAD), tl.float32)
            x_s = tl.zeros((H_PAD, C_PAD), tl.float32)
            y_s = tl.zeros((H_PAD, C_PAD), tl.float32)
            x_t = tl.zeros((H_PAD, C_PAD), tl.float32)
            y_t = tl.zeros((H_PAD, C_PAD), tl.float32)
            delta = tl.zeros((H_PAD,), tl.float32)
            for k in range(0, count):
                base = part_ptr + (first + k) * 6 * HC + hc
                sum_a += tl.load(base, mask=hc_mask, other=0.0)
                sum_b += tl.load(base + HC, mask=hc_mask, other=0.0)
                x_s += tl.load(base + 2 * HC, mask=hc_mask, other=0.0)
                y_s += tl.load(base + 3 * HC, mask=hc_mask, other=0.0)
                x_t += tl.load(base + 4 * HC, mask=hc_mask, other=0.0)
                y_t += tl.load(base + 5 * HC, mask=hc_mask, other=0.0)
                delta += tl.load(
                    part_delta_ptr + (first + k) * H + h, mask=h_mask,
                    other=0.0,
                )  # fmt: skip
            dqd = sum_a - delta[:, None] * sum_b
            tl.store(dqd_ptr + v * d_stride + hc, dqd, mask=hc_mask)
            tl.store(delta_ptr + v * H + h, delta, mask=h_mask)
            g_as += x_s - delta[:, None] * y_s
            g_at += x_t - delta[:, None] * y_t
    base = gatt_ptr + (gatt_first + pid.to(tl.int64)) * 2 * HC
    tl.store(base + hc, g_as, mask=hc_mask)
    tl.store(base + HC + hc, g_at, mask=hc_mask)


@triton.jit(do_not_specialize=['rows', 'width'])
def gate_att_grad_kernel(
    gatt_ptr, out_ptr, rows, width, BLOCK_R: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    r"""Backward, the attention vectors' gradients: sums the :obj:`rows`
    rows of :obj:`width` sums that the target-side pass's programs wrote
    (:obj:`gatt`, each program's :math:`\mathbf{a}_s` and
    :math:`\mathbf{a}_t` sums) into :obj:`out`, in the same order at every
    call: :obj:`BLOCK` columns per program, :obj:`BLOCK_R` rows at a
    time."""
    c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    r = tl.arange(0, BLOCK_R)
    acc = tl.zeros((BLOCK,), tl.float32)
    for first in range(0, rows, BLOCK_R):
        row = (first + r).to(tl.int64)
        m = (row[:, None] < rows) & (c[None, :] < width)
        tile = tl.load(gatt_ptr + row[:, None] * width + c[None, :], mask=m,
                       other=0.0)  # fmt: skip
        acc += tl.sum(tile, 0)
    tl.store(out_ptr + c, acc, mask=c < width)


@triton.jit(do_not_specialize=['num_src', *WORK_LIST])
def gate_bwd_src_kernel(
    qs_ptr, qd_ptr, val_ptr, ep_ptr, as_ptr, at_ptr,
    dst_ptr, kind_ptr, rev_rowptr_ptr, lists_ptr, nodes_ptr,
    rev_pos_ptr, lse_ptr, gout_ptr,
    galpha_ptr, delta_ptr, dproj_ptr, dep_ptr, part_ptr,
    num_src, seed_ptr, p_drop, scale, slope, q_stride, g_v, g_h, g_c,
    list_first, node_first, list_width, dqs_first, dval_first,
    d_stride,
    H: tl.constexpr, C: tl.constexpr, H_PAD: tl.constexpr,
    C_PAD: tl.constexpr, BLOCK_E: tl.constexpr, SEG: tl.constexpr,
    HAS_EDGE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    HAS_GALPHA: tl.constexpr,
):  # fmt: skip
    r"""Backward, pass 2: one program per segment of at most :obj:`SEG`
    outgoing edges of a source node (the reverse CSR holds their CSR
    positions; split as :func:`gate_fwd_kernel` splits the incoming ones):
    recomputes :math:`\alpha_e` and :math:`ds_e = \alpha_e (d\alpha_e -
    \delta_v)`, sums :math:`dU x_u = \sum_e ds_e g_e` and :math:`dW x_u =
    \sum_e \alpha'_e \, d\mathrm{out}_v`, and writes the per-edge
    :math:`dz_e = ds_e g_e` (the gradient of the edge projection) at CSR
    position :obj:`p`; every edge is visited by exactly one program, so no
    atomics. The segments of a split node write their sums to the partial
    slots :obj:`partptr[u] + k`, added up by
    :func:`gate_bwd_src_combine_kernel`."""
    if HAS_DROPOUT:  # (Loaded once, not per block of edges.)
        seed = tl.load(seed_ptr)
    dqs_ptr = dproj_ptr + dqs_first  # (rows d_stride apart)
    dval_ptr = dproj_ptr + dval_first
    segptr_ptr, seg_node_ptr, partptr_ptr = _work_list(
        lists_ptr, nodes_ptr, list_first, node_first, list_width
    )
    HC: tl.constexpr = H * C
    node, u, count, k, start, end = _segment(
        tl.program_id(0), num_src, tl.num_programs(0), seg_node_ptr,
        segptr_ptr, rev_rowptr_ptr, SEG,
    )  # fmt: skip
    if node >= num_src:
        return
    h, hc, hc_mask = _tile(H, C, H_PAD, C_PAD)
    g_hc = _strided(H_PAD, C_PAD, g_h, g_c)
    h_mask = h < H
    a_s = tl.load(as_ptr + hc, mask=hc_mask, other=0.0).to(tl.float32)
    a_t = tl.load(at_ptr + hc, mask=hc_mask, other=0.0).to(tl.float32)
    val = tl.load(val_ptr + u * q_stride + hc, mask=hc_mask, other=0.0)
    val = val.to(tl.float32)
    dqs = tl.zeros((H_PAD, C_PAD), tl.float32)
    dval = tl.zeros((H_PAD, C_PAD), tl.float32)
    for block in range(start, end, BLOCK_E):
        i = block + tl.arange(0, BLOCK_E)
        edge_mask = i < end
        p = tl.load(rev_pos_ptr + i, mask=edge_mask, other=0).to(tl.int64)
        v = tl.load(dst_ptr + p, mask=edge_mask, other=0).to(tl.int64)
        kind = tl.load(kind_ptr + p, mask=edge_mask, other=2).to(tl.int32)
        m3 = edge_mask[:, None, None] & hc_mask[None, :, :]
        node3 = v[:, None, None] * g_v + g_hc[None, :, :]
        rows_d = v[:, None, None] * q_stride + hc[None, :, :]
        qd = tl.load(qd_ptr + rows_d, mask=m3, other=0.0).to(tl.float32)
        rows = tl.zeros((BLOCK_E,), tl.int64) + u
        z, act, att, score, valid = _edge_scores(
            qs_ptr, ep_ptr, rows, p, edge_mask, kind, qd, a_s, a_t, hc,
            hc_mask, slope, q_stride, HC, HAS_EDGE,
        )  # fmt: skip
        mh = edge_mask[:, None] & h_mask[None, :]
        node2 = v[:, None] * H + h[None, :]
        lse = tl.load(lse_ptr + node2, mask=mh, other=0.0)
        alpha = tl.where(valid[:, None], tl.exp(score - lse), 0.0)
        go = tl.load(gout_ptr + node3, mask=m3, other=0.0).to(tl.float32)
        d_alpha = tl.sum(go * val[None, :, :], axis=2)
        if HAS_GALPHA:
            d_alpha += tl.load(
                galpha_ptr + p[:, None] * H + h[None, :], mask=mh, other=0.0
            ).to(tl.float32)
        kept = alpha
        if HAS_DROPOUT:
            keep = _keep(seed, p, h, p_drop, H)
            d_alpha = tl.where(keep, d_alpha * scale, 0.0)
            kept = tl.where(keep, alpha * scale, 0.0)
        delta = tl.load(delta_ptr + node2, mask=mh, other=0.0)
        ds = alpha * (d_alpha - delta)
        dz = ds[:, :, None] * att * tl.where(z > 0, 1.0, slope)
        dqs += tl.sum(dz, axis=0)
        dval += tl.sum(kept[:, :, None] * go, axis=0)
        if HAS_EDGE:
            tl.store(dep_ptr + p[:, None, None] * HC + hc[None, :, :], dz, m3)
    if count == 1:
        tl.store(dqs_ptr + u * d_stride + hc, dqs, mask=hc_mask)
        tl.store(dval_ptr + u * d_stride + hc, dval, mask=hc_mask)
    else:
        slot = (tl.load(partptr_ptr + u) + k).to(tl.int64)
        tl.store(part_ptr + slot * 2 * HC + hc, dqs, mask=hc_mask)
        tl.store(part_ptr + slot * 2 * HC + HC + hc, dval, mask=hc_mask)


@triton.jit(do_not_specialize=[*WORK_LIST])
def gate_bwd_src_combine_kernel(
    lists_ptr, nodes_ptr, part_ptr, dproj_ptr,
    list_first, node_first, list_width, dqs_first, dval_first,
    d_stride,
    H: tl.constexpr, C: tl.constexpr, H_PAD: tl.constexpr,
    C_PAD: tl.constexpr,
):  # fmt: skip
    r"""One program per source node: adds up the partial sums of a node
    split into several segments, in segment order."""
    dqs_ptr = dproj_ptr + dqs_first  # (rows d_stride apart)
    dval_ptr = dproj_ptr + dval_first
    segptr_ptr, seg_node_ptr, partptr_ptr = _work_list(
        lists_ptr, nodes_ptr, list_first, node_first, list_width
    )
    HC: tl.constexpr = H * C
    u = tl.program_id(0).to(tl.int64)
    count = tl.load(segptr_ptr + u + 1) - tl.load(segptr_ptr + u)
    if count <= 1:
        return
    h, hc, hc_mask = _tile(H, C, H_PAD, C_PAD)
    first = tl.load(partptr_ptr + u).to(tl.int64)
    dqs = tl.zeros((H_PAD, C_PAD), tl.float32)
    dval = tl.zeros((H_PAD, C_PAD), tl.float32)
    for k in range(0, count):
        base = part_ptr + (first + k) * 2 * HC + hc
        dqs += tl.load(base, mask=hc_mask, other=0.0)
        dval += tl.load(base + HC, mask=hc_mask, other=0.0)
    tl.store(dqs_ptr + u * d_stride + hc, dqs, mask=hc_mask)
    tl.store(dval_ptr + u * d_stride + hc, dval, mask=hc_mask)


@triton.jit(do_not_specialize=['num_src', *WORK_LIST])
def gate_bwd_src_rec_kernel(
    as_ptr, at_ptr, dst_ptr, kind_ptr, rev_rowptr_ptr, lists_ptr,
    nodes_ptr, rev_pos_ptr, gout_ptr, delta_ptr,
    rec_alpha_ptr, rec_dalpha_ptr, rec_bits_ptr,
    dproj_ptr, dep_ptr, part_ptr,
    num_src, seed_ptr, p_drop, scale, slope, g_v, g_h, g_c,
    list_first, node_first, list_width, dqs_first, dval_first,
    d_stride,
    H: tl.constexpr, C: tl.constexpr, H_PAD: tl.constexpr,
    C_PAD: tl.constexpr, BLOCK_E: tl.constexpr, SEG: tl.constexpr,
    HAS_EDGE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
):  # fmt: skip
    r""":func:`gate_bwd_src_kernel` from the record of
    :func:`gate_bwd_dst_rec_kernel`: per outgoing edge it reads
    :math:`\alpha_e`, :math:`d\alpha_e` and the signs of :math:`z_e` (16
    bytes per head) and :math:`\delta_v`, and gathers one row,
    :math:`d\mathrm{out}_v`, instead of recomputing the score (the rows
    :math:`\mathbf{V} \mathbf{x}_v`, the edge projection, and the
    log-sum-exp): :math:`ds_e = \alpha_e (d\alpha_e - \delta_v)`,
    :math:`dz_e = ds_e \, \mathbf{a}_e \odot \phi'(z_e)`, :math:`dU x_u =
    \sum_e dz_e`, :math:`dW x_u = \sum_e \alpha'_e d\mathrm{out}_v`. The
    same segments, partial slots (:func:`gate_bwd_src_combine_kernel`)
    and per-edge :math:`dz_e` as :func:`gate_bwd_src_kernel`."""
    if HAS_DROPOUT:  # (Loaded once, not per block of edges.)
        seed = tl.load(seed_ptr)
    dqs_ptr = dproj_ptr + dqs_first  # (rows d_stride apart)
    dval_ptr = dproj_ptr + dval_first
    segptr_ptr, seg_node_ptr, partptr_ptr = _work_list(
        lists_ptr, nodes_ptr, list_first, node_first, list_width
    )
    HC: tl.constexpr = H * C
    node, u, count, k, start, end = _segment(
        tl.program_id(0), num_src, tl.num_programs(0), seg_node_ptr,
        segptr_ptr, rev_rowptr_ptr, SEG,
    )  # fmt: skip
    if node >= num_src:
        return
    h, hc, hc_mask = _tile(H, C, H_PAD, C_PAD)
    g_hc = _strided(H_PAD, C_PAD, g_h, g_c)
    h_mask = h < H
    c64 = tl.arange(0, C_PAD).to(tl.int64)
    a_s = tl.load(as_ptr + hc, mask=hc_mask, other=0.0).to(tl.float32)
    a_t = tl.load(at_ptr + hc, mask=hc_mask, other=0.0).to(tl.float32)
    dqs = tl.zeros((H_PAD, C_PAD), tl.float32)
    dval = tl.zeros((H_PAD, C_PAD), tl.float32)
    for block in range(start, end, BLOCK_E):
        i = block + tl.arange(0, BLOCK_E)
        edge_mask = i < end
        p = tl.load(rev_pos_ptr + i, mask=edge_mask, other=0).to(tl.int64)
        v = tl.load(dst_ptr + p, mask=edge_mask, other=0).to(tl.int64)
        kind = tl.load(kind_ptr + p, mask=edge_mask, other=2).to(tl.int32)
        mh = edge_mask[:, None] & h_mask[None, :]
        rec = p[:, None] * H + h[None, :]
        alpha = tl.load(rec_alpha_ptr + rec, mask=mh, other=0.0)
        d_alpha = tl.load(rec_dalpha_ptr + rec, mask=mh, other=0.0)
        bits = tl.load(rec_bits_ptr + rec, mask=mh, other=0)
        delta = tl.load(delta_ptr + v[:, None] * H + h[None, :], mask=mh,
                        other=0.0)  # fmt: skip
        ds = alpha * (d_alpha - delta)
        positive = ((bits[:, :, None] >> c64[None, None, :]) & 1) == 1
        is_self = ((kind & 1) == 1)[:, None, None]
        att = tl.where(is_self, a_t[None, :, :], a_s[None, :, :])
        dz = ds[:, :, None] * att * tl.where(positive, 1.0, slope)
        dqs += tl.sum(dz, axis=0)
        kept = alpha
        if HAS_DROPOUT:
            keep = _keep(seed, p, h, p_drop, H)
            kept = tl.where(keep, alpha * scale, 0.0)
        m3 = edge_mask[:, None, None] & hc_mask[None, :, :]
        go = tl.load(gout_ptr + v[:, None, None] * g_v + g_hc[None, :, :],
                     mask=m3, other=0.0).to(tl.float32)  # fmt: skip
        dval += tl.sum(kept[:, :, None] * go, axis=0)
        if HAS_EDGE:
            tl.store(dep_ptr + p[:, None, None] * HC + hc[None, :, :], dz, m3)
    if count == 1:
        tl.store(dqs_ptr + u * d_stride + hc, dqs, mask=hc_mask)
        tl.store(dval_ptr + u * d_stride + hc, dval, mask=hc_mask)
    else:
        slot = (tl.load(partptr_ptr + u) + k).to(tl.int64)
        tl.store(part_ptr + slot * 2 * HC + hc, dqs, mask=hc_mask)
        tl.store(part_ptr + slot * 2 * HC + HC + hc, dval, mask=hc_mask)
