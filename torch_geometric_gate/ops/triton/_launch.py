r"""The host side of the Triton kernels: the launch settings, the edge
tiles, the rows the kernels read, and the launches of the forward kernels
(``_kernels.py``) on the tensors :mod:`~torch_geometric_gate.ops.triton`
hands them; the backward's launches are in :mod:`._launch_backward`.
:func:`_forward` serves both the eager autograd function and the custom
operators of :mod:`~torch_geometric_gate.ops.triton`.
"""

import functools
from typing import Optional

import torch
from torch import Tensor

from torch_geometric_gate.ops.switch import KernelSettings
from torch_geometric_gate.ops.triton._csr import (
    CSR,
    csr_dst,
    segments_of,
)
from torch_geometric_gate.ops.triton._grid import cdiv as _cdiv
from torch_geometric_gate.ops.triton._grid import on_device as _on_device
from torch_geometric_gate.ops.triton._grid import pow2 as _pow2

#: Edges per block in the kernels' loops; :obj:`None` picks it from the
#: heads, channels, average degree and the tile of the switch's settings
#: (:attr:`~torch_geometric_gate.ops.KernelSettings.triton_forward_tile`,
#: :attr:`~torch_geometric_gate.ops.KernelSettings.triton_backward_tile`),
#: at least :data:`MIN_BLOCK_EDGES` (tests set a small one to cover
#: degrees above it).
BLOCK_EDGES: Optional[int] = None
#: The edge-parallel attention-weights kernel's tile (at least 16 edges):
#: at 4096, 8 heads of 64 channels spill for sm_90.
ALPHA_TILE = 2048
MIN_BLOCK_EDGES = 4

#: The forward splits a target node's incoming edges into segments of at
#: most this many edges (rounded down to whole blocks), one program each.
SEGMENT_EDGES = 1024


def _block_edges(h_pad: int, c_pad: int, tile: int, degree: float) -> int:
    if BLOCK_EDGES is not None:
        return BLOCK_EDGES
    cap = max(1, min(64, tile // (h_pad * c_pad)))
    return min(cap, max(MIN_BLOCK_EDGES, _pow2(int(-(-degree // 1)))))


def _segment_length(block: int) -> int:
    r"""The edges of a segment of the work lists (:func:`segments`): a
    whole number of blocks, about :data:`SEGMENT_EDGES`."""
    return max(1, SEGMENT_EDGES // block) * block


def _reverse_rows(settings, num_src: int, num_edges: int, h_pad, c_pad,
                  seg: int):  # fmt: skip
    r"""The reverse CSR's row pointer and nodes, for the forward to build
    the work list of the backward's second pass with its own (one set of
    launches for both) where the backward will run and split its nodes
    into segments of the same length; else :obj:`None`."""
    reverse = getattr(settings, 'reverse', None)
    if reverse is None or num_src == 0:
        return None
    tile = settings.backward_tile
    block = _block_edges(h_pad, c_pad, tile, num_edges / max(num_src, 1))
    if _segment_length(block) != seg:
        return None
    return reverse[0], num_src


def _num_programs(device: torch.device, n: int) -> int:
    if device.type == 'cuda':
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        return max(1, min(n, 8 * sms))
    return max(1, min(n, 4))


def _edge_projection(edge_attr, weight_edge, perm):
    r"""The edge features in CSR order and their projection :obj:`[E, H *
    C]` (:obj:`None, None` without edge features)."""
    if edge_attr is None or weight_edge is None:
        return None, None
    attr = edge_attr.index_select(0, perm)
    return attr, (attr @ weight_edge.t()).contiguous()


_DEFAULTS = KernelSettings()


class _Settings:
    r"""What the kernels read besides tensors (the kind of each edge too),
    with the dtypes of the weights and of the output derived from the
    inputs'. :obj:`num_loops`: the appended self-loops (the last edges).
    :obj:`options`: the switch's settings in force (the
    tiles, layouts and warps of the kernels)."""

    def __init__(self, q_src, value, att_neighbor, att_self, kind, num_dst,
                 slope, p_drop, seed, need_weights, num_loops=0,
                 options=None):  # fmt: skip
        options = options or _DEFAULTS
        self.forward_tile = options.triton_forward_tile
        self.backward_tile = options.triton_backward_tile
        self.one_head_layout = options.triton_one_head_layout
        self.one_head_nodes = options.triton_one_head_nodes
        self.record = options.triton_backward_record
        self.warps = options.triton_warps
        self.num_dst, self.num_loops = num_dst, num_loops
        self.slope, self.p_drop = float(slope), float(p_drop)
        # The dropout seed [1] on the inputs' device (`_draw_seed`), which the
        # kernels read from memory; without dropout a tensor in its place
        # that they never read:
        self.seed = kind if seed is None else seed
        self.need_weights = need_weights
        self.scale = 0.0 if self.p_drop >= 1.0 else 1.0 / (1.0 - self.p_drop)
        self.score_dtype, self.out_dtype = _dtypes(
            q_src, value, att_neighbor, att_self
        )
        self.kind = kind
        # Whether the caller reads the appended self-loops' weights alone
        # (`AttentionParams.loop_weights_only`): `_forward` returns those,
        # [num_loops, H], from `_loop_weights`:
        self.loop_weights = False
        # Whether the autograd function differentiates the product whose
        # views the projections are, in their place (the views in `parts`
        # until its forward reads them):
        self.fused, self.parts = False, None
        # Whether the projections' gradients may be views of the
        # backward's buffer (not where one is a leaf: its .grad):
        self.views = True


# torch.promote_types is an ATen operator (a host operator per call):
# once per pair of dtypes.
_promote = functools.lru_cache(maxsize=None)(torch.promote_types)


def _dtypes(q_src, value, att_neighbor, att_self):
    r"""The dtypes of the attention weights and of the output."""
    if torch.compiler.is_compiling():
        promote = torch.promote_types
    else:
        promote = _promote
    att_dtype = promote(att_neighbor.dtype, att_self.dtype)
    score_dtype = promote(q_src.dtype, att_dtype)
    return score_dtype, promote(value.dtype, score_dtype)


def _rows(q_src: Tensor, q_dst: Tensor, value: Tensor):
    r"""The projections as the kernels read them, and their row stride:
    rows of :obj:`H x C` contiguous values, one stride apart in all three
    (the layer's views of its one product :obj:`[N, 3, H, C]` are read in
    place), else contiguous copies."""
    heads, channels = value.shape[1], value.shape[2]
    stride = value.stride(0)

    def fits(t: Tensor) -> bool:
        return (
            (t.size(0) <= 1 or t.stride(0) == stride)
            and (heads == 1 or t.stride(1) == channels)
            and (channels == 1 or t.stride(2) == 1)
        )

    if value.size(0) > 1 and all(fits(t) for t in (q_src, q_dst, value)):
        return q_src, q_dst, value, stride
    q_src, q_dst, value = (t.contiguous() for t in (q_src, q_dst, value))
    return q_src, q_dst, value, heads * channels


def _draw_seed(device: torch.device) -> Tensor:
    r"""The dropout seed :obj:`[1]` (int64), drawn on :obj:`device` by its
    generator (so :func:`torch.manual_seed` reproduces it), where the
    kernels read it: no host sync, and inside a CUDA graph drawn by
    PyTorch's capture-safe generator (a seed drawn on the host would be
    captured as a constant)."""
    return torch.randint(2**31 - 1, (1,), device=device)


def _keep_mask(settings: _Settings, num_edges: int, heads: int, device):
    r"""The dropout mask :obj:`[E, H]` in CSR order."""
    from torch_geometric_gate.ops.triton import _kernels as k

    keep = torch.ones(num_edges, heads, dtype=torch.int8, device=device)
    if settings.p_drop > 0 and num_edges > 0:
        block = 128
        with _on_device(device):
            k.gate_keep_kernel[(_cdiv(num_edges, block),)](
                keep, num_edges, settings.seed, settings.p_drop,
                heads, _pow2(heads), block,
            )  # fmt: skip
    return keep.bool()


def _launch_forward(
    csr, settings, q_src, q_dst, value, ep, a_s, a_t, warps=None
):
    r"""Runs :func:`gate_fwd_kernel` (and :func:`gate_combine_kernel` when
    a node may be split) on the rows of :func:`_rows`: returns :obj:`out`
    and the log-sum-exp. :obj:`warps`: the forward kernel's warps (default:
    :obj:`settings.warps`, else Triton's, 4)."""
    from torch_geometric_gate.ops.triton import _kernels as k

    warps = warps or settings.warps
    q_src, q_dst, value, q_stride = _rows(q_src, q_dst, value)
    heads, channels = value.shape[1], value.shape[2]
    h_pad, c_pad = _pow2(heads), _pow2(channels)
    num_dst, num_edges = settings.num_dst, csr.src.numel()
    device = value.device
    block = _block_edges(
        h_pad, c_pad, settings.forward_tile, num_edges / max(num_dst, 1)
    )
    seg = _segment_length(block)
    out = torch.empty(
        num_dst, heads, channels, device=device, dtype=settings.out_dtype
    )
    if num_dst == 0:
        return out, _forward_buffers(0, heads, channels, 0, device)[0]
    also = _reverse_rows(
        settings, value.shape[0], num_edges, h_pad, c_pad, seg
    )  # The backward's second pass's list with this one:
    work = segments_of(settings, csr.rowptr, num_dst, num_edges, seg, also)
    grid, slots = work.grid, work.slots
    lse, part_acc, part_ml = _forward_buffers(
        num_dst, heads, channels, slots, device
    )
    with _on_device(device):
        k.gate_fwd_kernel[(grid,)](
            q_src, q_dst, value, ep if ep is not None else q_src, a_s, a_t,
            csr.src, settings.kind, csr.rowptr, *work.buffers(),
            out, lse, part_acc, part_ml, num_dst,
            settings.seed, settings.p_drop, settings.scale, settings.slope,
            q_stride, *work.offsets(),
            heads, channels, h_pad, c_pad, block, seg,
            ep is not None, settings.p_drop > 0, **_warps(warps),
        )  # fmt: skip
        if slots > 0:
            k.gate_combine_kernel[(num_dst,)](
                *work.buffers(), part_acc, part_ml, out, lse,
                settings.scale, *work.offsets(), heads, channels, h_pad,
                c_pad,
            )  # fmt: skip
    return out, lse


def _forward_buffers(num_dst, heads, channels, slots, device):
    r"""The forward's float32 log-sum-exp :obj:`[N, H]` and, where nodes
    split (:obj:`slots > 0`), the partial accumulators :obj:`[slots, H,
    C]` and running maxima and sums :obj:`[slots, 2, H]` as the rows of
    one buffer of :obj:`[., H]` rows (one allocation; the log-sum-exp
    stands in for the partial buffers where there are none: not read)."""
    f32 = dict(device=device, dtype=torch.float32)
    if slots == 0:
        lse = torch.empty(num_dst, heads, **f32)
        return lse, lse, lse
    rows = [num_dst, slots * channels, 2 * slots]
    return torch.empty(sum(rows), heads, **f32).split(rows)


def _forward(
    q_src, q_dst, value, edge_attr, weight_edge, att_neighbor, att_self,
    perm, src_s, rowptr, settings,
):  # fmt: skip
    r"""The forward kernels: the attention weights (:obj:`[E, H]`, those
    of the appended self-loops alone :obj:`[num_loops, H]` with
    :obj:`settings.loop_weights`, or :obj:`None`), the output and the
    log-sum-exp."""
    from torch_geometric_gate.ops.triton import _kernels as k

    # The targets in CSR order where the caller has them:
    csr = CSR(perm, src_s, rowptr, getattr(settings, 'dst', None))
    heads, channels = value.shape[1], value.shape[2]
    h_pad, c_pad = _pow2(heads), _pow2(channels)
    num_edges = perm.numel()
    device = value.device
    q_src_c, q_dst_c, value_c, q_stride = _rows(q_src, q_dst, value)
    a_s, a_t = att_neighbor.contiguous(), att_self.contiguous()
    _, ep = _edge_projection(edge_attr, weight_edge, perm)
    # The one-head layout, where the settings ask for it:
    launch = (
        _launch_forward_1h
        if settings.one_head_layout and heads == 1
        else _launch_forward
    )
    out, lse = launch(csr, settings, q_src_c, q_dst_c, value_c, ep, a_s, a_t)
    alpha = None
    if settings.need_weights:
        alpha = torch.empty(
            num_edges, heads, device=device, dtype=settings.score_dtype
        )
        if num_edges > 0:
            dst_s = csr_dst(csr)
            block_a = BLOCK_EDGES or max(
                16, min(64, ALPHA_TILE // (h_pad * c_pad))
            )
            flags = (ep is not None, settings.p_drop > 0)
            with _on_device(device):
                k.gate_alpha_kernel[(_cdiv(num_edges, block_a),)](
                    q_src_c, q_dst_c, ep if flags[0] else q_src_c, a_s,
                    a_t, src_s, dst_s, settings.kind, perm, lse, alpha,
                    num_edges, settings.seed, settings.p_drop,
                    settings.scale, settings.slope, q_stride,
                    heads, channels, h_pad, c_pad, block_a, *flags,
                )  # fmt: skip
    if settings.loop_weights:
        alpha = _loop_weights(
            q_src, q_dst, edge_attr, weight_edge, a_s, a_t, rowptr,
            settings.kind, lse, settings,
        )  # fmt: skip
    return alpha, out, lse


def _warps(warps):
    return {} if warps is None else {'num_warps': warps}


#: Nodes per program of :func:`gate_loop_alpha_kernel`, at most (fewer
#: when :obj:`H * C` is large, to keep its tiles within
#: :data:`ALPHA_TILE`).
LOOP_BLOCK_NODES = 64


def _loop_weights(
    q_src, q_dst, edge_attr, weight_edge, att_neighbor, att_self, rowptr,
    kind, lse, settings,
):  # fmt: skip
    r"""The attention weights of the :obj:`settings.num_loops` appended
    self-loops alone, :obj:`[num_loops, H]` (row :obj:`v`: the loop
    :obj:`(v, v)`, after dropout as :func:`_forward`'s weights), from the
    forward's log-sum-exp: :obj:`N x H` written instead of :obj:`E x H`
    (equal to the last :obj:`num_loops` rows of :func:`_forward`'s
    weights). :obj:`kind` is in CSR order; the appended loops are the last
    :obj:`num_loops` edges of :obj:`edge_attr`."""
    from torch_geometric_gate.ops.triton import _kernels as k

    num_loops = settings.num_loops
    heads, channels = q_src.shape[1], q_src.shape[2]
    h_pad, c_pad = _pow2(heads), _pow2(channels)
    device = q_src.device
    alpha = torch.empty(
        num_loops, heads, device=device, dtype=settings.score_dtype
    )
    if num_loops == 0:
        return alpha
    q_src_c, q_dst_c, _, q_stride = _rows(q_src, q_dst, q_src)
    eloop = None
    if edge_attr is not None and weight_edge is not None:
        loops = edge_attr[edge_attr.size(0) - num_loops :]
        eloop = (loops @ weight_edge.t()).contiguous()
    block = BLOCK_EDGES or max(
        1, min(LOOP_BLOCK_NODES, ALPHA_TILE // (h_pad * c_pad))
    )
    with _on_device(device):
        k.gate_loop_alpha_kernel[(_cdiv(num_loops, block),)](
            q_src_c, q_dst_c, eloop if eloop is not None else q_src_c,
            att_neighbor.contiguous(), att_self.contiguous(), kind, rowptr,
            lse, alpha, num_loops, settings.seed, settings.p_drop,
            settings.scale, settings.slope, q_stride,
            heads, channels, h_pad, c_pad, block,
            eloop is not None, settings.p_drop > 0,
        )  # fmt: skip
    return alpha


#: :func:`_launch_forward_1h`'s warps unless the settings give them.
ONE_HEAD_WARPS = 2


def _launch_forward_1h(
    csr, settings, q_src, q_dst, value, ep, a_s, a_t, nodes=None, warps=None
):
    r""":func:`_launch_forward` for one head with :func:`gate_fwd_1h_kernel`
    (2-D tiles, :obj:`nodes` segments per program, :obj:`warps` warps;
    defaults :obj:`settings.one_head_nodes`, :obj:`settings.warps` or
    :data:`ONE_HEAD_WARPS`): the same output and log-sum-exp, the same
    partial slots merged by :func:`gate_combine_kernel`."""
    from torch_geometric_gate.ops.triton import _kernels as k

    heads, channels = value.shape[1], value.shape[2]
    if heads != 1:
        raise ValueError(
            f'gate_fwd_1h_kernel computes one head, got {heads} heads'
        )
    nodes = nodes or settings.one_head_nodes
    warps = warps or settings.warps or ONE_HEAD_WARPS
    q_src, q_dst, value, q_stride = _rows(q_src, q_dst, value)
    c_pad = _pow2(channels)
    num_dst, num_edges = settings.num_dst, csr.src.numel()
    device = value.device
    tile = settings.forward_tile
    block = _block_edges(1, c_pad, tile, num_edges / max(num_dst, 1))
    seg = _segment_length(block)
    out = torch.empty(
        num_dst, 1, channels, device=device, dtype=settings.out_dtype
    )
    if num_dst == 0:
        return out, _forward_buffers(0, 1, channels, 0, device)[0]
    also = _reverse_rows(
        settings, value.shape[0], num_edges, 1, c_pad, seg
    )  # The backward's second pass's list with this one:
    work = segments_of(settings, csr.rowptr, num_dst, num_edges, seg, also)
    grid, slots = work.grid, work.slots
    lse, part_acc, part_ml = _forward_buffers(
        num_dst, 1, channels, slots, device
    )
    with _on_device(device):
        k.gate_fwd_1h_kernel[(_cdiv(grid, nodes),)](
            q_src, q_dst, value, ep if ep is not None else q_src, a_s, a_t,
            csr.src, settings.kind, csr.rowptr, *work.buffers(),
            out, lse, part_acc, part_ml, num_dst, grid,
            settings.seed, settings.p_drop, settings.scale, settings.slope,
            q_stride, *work.offsets(),
            channels, c_pad, block, seg, nodes,
            ep is not None, settings.p_drop > 0, num_warps=warps,
        )  # fmt: skip
        if slots > 0:
            k.gate_combine_kernel[(num_dst,)](
                *work.buffers(), part_acc, part_ml, out, lse,
                settings.scale, *work.offsets(), 1, channels, 1, c_pad,
            )  # fmt: skip
    return out, lse
