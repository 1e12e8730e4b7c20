r"""The host side of the Triton backward: the launches of its two passes
(the target side, then the source side, with the combine kernels of split
nodes; ``_kernels.py``), the sum of the attention vectors' gradients
between them, and its one buffer of float32 outputs.
:func:`_backward` serves both the eager autograd function and the custom
operators of :mod:`~torch_geometric_gate.ops.triton`; the settings, tiles
and rows are :mod:`._launch`'s.
"""

import torch

from torch_geometric_gate.ops.triton._csr import (
    CSR,
    csr_dst,
    reverse_csr,
    segments_of,
    split_slots,
)
from torch_geometric_gate.ops.triton._grid import cdiv as _cdiv
from torch_geometric_gate.ops.triton._grid import on_device as _on_device
from torch_geometric_gate.ops.triton._grid import pow2 as _pow2
from torch_geometric_gate.ops.triton._launch import (
    ONE_HEAD_WARPS,
    _block_edges,
    _edge_projection,
    _num_programs,
    _rows,
    _segment_length,
    _warps,
)


def _backward(
    saved, settings, grad_alpha, grad_out, need, record=None, warps=None,
    views=False,
):  # fmt: skip
    r"""The backward kernels: the gradients of :obj:`q_src, q_dst, value,
    edge_attr, weight_edge, att_neighbor, att_self` (:obj:`None` where
    :obj:`need` does not ask), from the tensors :func:`_forward`'s caller
    saved. With :obj:`record` (default: :obj:`settings.record`; and at
    most 64 channels per head), the first pass writes a record per edge
    and head (16 bytes) that the second pass reads instead of recomputing
    the scores (:func:`gate_bwd_dst_rec_kernel`,
    :func:`gate_bwd_src_rec_kernel`). With :obj:`settings.one_head_layout`
    and one head, both passes run the one-head layout
    (:func:`gate_bwd_dst_1h_kernel`, :func:`gate_bwd_src_1h_kernel`:
    :obj:`settings.one_head_nodes` segments per program, the record too).
    :obj:`warps`: the two passes' warps (default: :obj:`settings.warps`,
    else Triton's, 4; the one-head layout's :data:`ONE_HEAD_WARPS`).
    :obj:`views`: the gradients may be views of one tensor (the autograd
    function's; a custom operator returns none). With
    :obj:`settings.fused` (the projections are the views of one
    :obj:`[N, 3 H C]` product), the product's gradient (written by the
    kernels in place, rows :obj:`3 H C` apart) comes in the place of
    :obj:`q_src`'s, :obj:`None` in those of :obj:`q_dst` and
    :obj:`value`."""
    from torch_geometric_gate.ops.triton import _kernels as k

    record = settings.record if record is None else record
    warps = warps or settings.warps

    (
        q_src, q_dst, value, edge_attr, weight_edge, att_neighbor,
        att_self, perm, src_s, rowptr, kind, lse,
    ) = saved  # fmt: skip
    # The targets in CSR order where the caller has them:
    csr = CSR(perm, src_s, rowptr, getattr(settings, 'dst', None))
    num_edges, num_dst = perm.numel(), settings.num_dst
    num_src = value.shape[0]
    reverse = getattr(settings, 'reverse', None)
    if reverse is None:
        reverse = reverse_csr(csr, num_src)
    rev_rowptr, rev_pos = reverse
    dst_s = csr_dst(csr)
    heads, channels = value.shape[1], value.shape[2]
    h_pad, c_pad = _pow2(heads), _pow2(channels)
    tile = settings.backward_tile
    block_d = _block_edges(h_pad, c_pad, tile, num_edges / max(num_dst, 1))
    block_s = _block_edges(h_pad, c_pad, tile, num_edges / max(num_src, 1))
    device = value.device
    q_src_c, q_dst_c, value_c, q_stride = _rows(q_src, q_dst, value)
    a_s, a_t = att_neighbor.contiguous(), att_self.contiguous()
    attr, ep = _edge_projection(edge_attr, weight_edge, perm)
    if grad_out is None:
        grad_out = torch.zeros(
            num_dst, heads, channels, device=device, dtype=torch.float32
        )
    # The output's gradient read with its strides (not copied where it is
    # expanded, as a sum or a mean over the heads gives it):
    g_v, g_h, g_c = grad_out.stride()
    if grad_alpha is not None:
        grad_alpha = grad_alpha.index_select(0, perm).contiguous()
    flags = (
        ep is not None, settings.p_drop > 0, grad_alpha is not None
    )  # fmt: skip
    common = (settings.seed, settings.p_drop, settings.scale)
    f32 = dict(device=device, dtype=torch.float32)
    seg = _segment_length(block_d)
    # The forward's work list when the segments are the same:
    work = segments_of(settings, rowptr, num_dst, num_edges, seg)
    num_segments, slots = work.grid, work.slots
    # The one-head layout (2-D tiles, `nodes` segments per program):
    one_head = settings.one_head_layout and heads == 1
    if one_head:
        nodes = settings.one_head_nodes
        warps = warps or ONE_HEAD_WARPS
        programs = _cdiv(num_segments, nodes)
    else:
        programs = _num_programs(device, num_segments)
    programs_c = _num_programs(device, num_dst) if slots > 0 else 0
    seg_s = _segment_length(block_s)
    slots_s = split_slots(num_edges, seg_s)
    # Where the projections are the views of one product, their
    # gradients too:
    fused = settings.fused
    (
        proj, g_att, g_as, g_at, d_ep, delta, part, part_delta, part_s,
    ) = _backward_buffers(
        value, num_dst, num_edges, flags[0], programs + programs_c, slots,
        slots_s, fused,
    )  # fmt: skip
    dproj, (dqd_first, dqs_first, dval_first), d_stride = proj[:3]
    ep_arg = ep if flags[0] else q_src_c
    ga_arg = grad_alpha if flags[2] else lse
    record = record and c_pad <= 64
    rec = (lse, lse, lse)  # Not read without the record.
    if record:
        rec = (
            torch.empty(num_edges, heads, **f32),
            torch.empty(num_edges, heads, **f32),
            torch.empty(num_edges, heads, device=device, dtype=torch.int64),
        )  # fmt: skip
    with _on_device(device):
        if num_dst > 0 and one_head:
            k.gate_bwd_dst_1h_kernel[(programs,)](
                q_src_c, q_dst_c, value_c, ep_arg, a_s, a_t,
                src_s, kind, rowptr, *work.buffers(),
                lse, grad_out, ga_arg,
                dproj, delta, g_att, part, part_delta, *rec,
                num_dst, num_segments, *common, settings.slope, q_stride,
                g_v, g_c, *work.offsets(), dqd_first, d_stride,
                channels, c_pad, block_d, seg, nodes, *flags, record,
                num_warps=warps,
            )  # fmt: skip
        elif num_dst > 0:
            # The record, when asked, goes after the partial slots:
            kernel, extra = k.gate_bwd_dst_kernel, ()
            if record:
                kernel, extra = k.gate_bwd_dst_rec_kernel, rec
            kernel[(programs,)](
                q_src_c, q_dst_c, value_c, ep_arg, a_s, a_t,
                src_s, kind, rowptr, *work.buffers(),
                lse, grad_out, ga_arg,
                dproj, delta, g_att, part, part_delta, *extra,
                num_dst, num_segments, *common, settings.slope, q_stride,
                g_v, g_h, g_c, *work.offsets(), dqd_first, d_stride,
                heads, channels, h_pad, c_pad, block_d, seg, *flags,
                **_warps(warps),
            )  # fmt: skip
        if num_dst > 0 and slots > 0:
            k.gate_bwd_combine_kernel[(programs_c,)](
                *work.buffers(), part, part_delta, dproj, delta,
                g_att, programs, num_dst, *work.offsets(), dqd_first,
                d_stride, heads, channels, h_pad, c_pad,
            )  # fmt: skip
        if num_dst > 0:
            # The programs' sums into g_as and g_at (its next part):
            width = 2 * heads * channels
            k.gate_att_grad_kernel[(_cdiv(width, ATT_GRAD_BLOCK),)](
                g_att, g_as, programs + programs_c, width,
                ATT_GRAD_ROWS, ATT_GRAD_BLOCK,
            )  # fmt: skip
        if num_src > 0:
            seg, part = seg_s, part_s
            src_firsts = (dqs_first, dval_first)
            work = segments_of(settings, rev_rowptr, num_src, num_edges, seg)
            grid, slots = work.grid, work.slots
            if one_head:
                k.gate_bwd_src_1h_kernel[(_cdiv(grid, nodes),)](
                    q_src_c, q_dst_c, value_c, ep_arg, a_s, a_t,
                    dst_s, kind, rev_rowptr, *work.buffers(),
                    rev_pos, lse, grad_out, ga_arg, delta, dproj,
                    d_ep if flags[0] else dproj, part, *rec,
                    num_src, grid, *common, settings.slope, q_stride,
                    g_v, g_c, *work.offsets(), *src_firsts, d_stride,
                    channels, c_pad, block_s, seg, nodes, *flags, record,
                    num_warps=warps,
                )  # fmt: skip
            elif record:
                k.gate_bwd_src_rec_kernel[(grid,)](
                    a_s, a_t, dst_s, kind, rev_rowptr, *work.buffers(),
                    rev_pos, grad_out, delta, *rec, dproj,
                    d_ep if flags[0] else dproj, part,
                    num_src, *common, settings.slope,
                    g_v, g_h, g_c, *work.offsets(), *src_firsts, d_stride,
                    heads, channels, h_pad, c_pad, block_s, seg, *flags[:2],
                    **_warps(warps),
                )  # fmt: skip
            else:
                k.gate_bwd_src_kernel[(grid,)](
                    q_src_c, q_dst_c, value_c, ep_arg, a_s, a_t,
                    dst_s, kind, rev_rowptr, *work.buffers(),
                    rev_pos, lse, grad_out, ga_arg, delta, dproj,
                    d_ep if flags[0] else dproj, part,
                    num_src, *common, settings.slope, q_stride,
                    g_v, g_h, g_c, *work.offsets(), *src_firsts, d_stride,
                    heads, channels, h_pad, c_pad, block_s, seg, *flags,
                    **_warps(warps),
                )  # fmt: skip
            if slots > 0:
                k.gate_bwd_src_combine_kernel[(num_src,)](
                    *work.buffers(), part, dproj, *work.offsets(),
                    *src_firsts, d_stride, heads, channels, h_pad, c_pad,
                )  # fmt: skip
    d_attr = d_weight = None
    if d_ep is not None:
        d_ep = d_ep.view(num_edges, heads * channels)
        if need[3]:
            d_attr = torch.empty_like(edge_attr)
            d_attr[perm.long()] = (d_ep @ weight_edge.to(torch.float32)).to(
                edge_attr.dtype
            )
        if need[4]:
            d_weight = (d_ep.t() @ attr.to(torch.float32)).to(
                weight_edge.dtype
            )
    # Views of one buffer where `views` allows them:
    if fused:  # The product's gradient in the place of q_src:
        projections = (
            proj[3].view(num_src, 3 * heads * channels).to(
                value.dtype, copy=not views
            )
            if need[0] else None,
            None, None,
        )  # fmt: skip
    else:
        d_q_dst, d_q_src, d_value = proj[3]
        projections = (
            d_q_src.to(q_src.dtype, copy=not views) if need[0] else None,
            d_q_dst.to(q_dst.dtype, copy=not views) if need[1] else None,
            d_value.to(value.dtype, copy=not views) if need[2] else None,
        )  # fmt: skip
    return (
        *projections,
        d_attr,
        d_weight,
        *_att_grads(g_as, g_at, att_neighbor, att_self, need),
    )  # fmt: skip


def _backward_buffers(
    value, num_dst, num_edges, edge, programs, slots, slots_s, fused
):
    r"""The backward's float32 outputs as parts of one zeroed buffer of
    :obj:`[H, C]` rows (one allocation; a :obj:`[N, H]` part takes
    :obj:`ceil(N / C)` rows): the gradients of the projections, the
    attention vectors' sums of the :obj:`programs` (two rows each)
    and their total, the gradients of :obj:`att_neighbor` and
    :obj:`att_self` (one row each, in this order), the edge projection's
    gradient (with :obj:`edge`, else :obj:`None`), :obj:`delta`, and the
    partial sums of the split nodes of both passes (:obj:`slots`,
    :obj:`slots_s`; :obj:`delta` stands in where there are none: not
    read). The projections' gradients come as :obj:`(buffer, (first of
    q_dst's, of q_src's, of value's), row stride, gradients)` (the kernels
    write them at :obj:`first + row * stride` of the buffer): three parts
    :obj:`q_dst, q_src, value`, or with :obj:`fused` one part of
    :obj:`N` rows of :obj:`value, q_src, q_dst` each, laid out as the
    product :obj:`[N, 3, H, C]` they are the parts of."""
    num_src, heads, channels = value.shape
    width = heads * channels
    proj = [3 * num_src] if fused else [num_dst, num_src, num_src]
    rows = proj + [2 * programs, 1, 1, num_edges * edge]
    rows += [_cdiv(num_dst, channels), 6 * slots, _cdiv(slots, channels)]
    rows += [2 * slots_s]
    buffer = torch.zeros(
        sum(rows), heads, channels, device=value.device, dtype=torch.float32
    )
    parts = buffer.split(rows)
    if fused:
        grads, firsts, stride = parts[0], (2 * width, width, 0), 3 * width
    else:
        grads, stride = parts[:3], width
        firsts = (0, num_dst * width, (num_dst + num_src) * width)
    g_att, g_as, g_at, d_ep, delta = parts[len(proj) : len(proj) + 5]
    part = part_delta = part_s = delta
    if slots > 0:
        part, part_delta = parts[len(proj) + 5], parts[len(proj) + 6]
    if slots_s > 0:
        part_s = parts[len(proj) + 7]
    return (
        (buffer, firsts, stride, grads), g_att, g_as, g_at,
        d_ep if edge else None, delta, part, part_delta, part_s,
    )  # fmt: skip


#: :func:`gate_att_grad_kernel`'s columns per program and rows at a time.
ATT_GRAD_BLOCK, ATT_GRAD_ROWS = 128, 32


def _att_grads(g_as, g_at, att_neighbor, att_self, need):
    r"""The gradients of the attention vectors (:obj:`[1, H, C]` parts of
    the backward's buffer) in their dtypes, copies: they are parameters'
    :obj:`.grad`, which would keep the whole buffer (the projections'
    gradients, partial sums) alive as views of it."""
    return (
        g_as.to(att_neighbor.dtype, copy=True) if need[5] else None,
        g_at.to(att_self.dtype, copy=True) if need[6] else None,
    )
