r"""The Triton kernels: GATE's attention fused per target node.

Reachable only through :func:`~torch_geometric_gate.attention_kernel`
:obj:`('triton')` until they have passed the test suite on a GPU
(:data:`~torch_geometric_gate.ops.dispatch.TRITON_VERIFIED_ON_GPU`); on CPU
they run under the Triton interpreter (:obj:`TRITON_INTERPRET=1`, slow, for
tests only).

The design follows the Triton graph-transformer kernel of
`anemoi-core <https://github.com/ecmwf/anemoi-core>`_ (FlashAttention over a
CSR of incoming edges), with GATE's score:

* **Forward** (:func:`gate_fwd_kernel`): one program per target node
  :math:`v` walks its incoming edges in blocks of :obj:`BLOCK_E` (any
  degree), scores them (:math:`\mathbf{a}_t` on self-loops,
  :math:`\mathbf{a}_s` elsewhere, masked edges excluded), keeps an online
  softmax (running max and sum) and accumulates :math:`\sum_u \alpha_{uv}
  \mathbf{W} \mathbf{x}_u` in float32. It saves only the :obj:`[N, H]`
  log-sum-exp: no :obj:`[E, H, C]` or :obj:`[E, H]` tensor is kept for
  backward. A second, edge-parallel kernel writes the attention weights
  :math:`\exp(e_{uv} - \mathrm{lse}_v)` straight into the caller's edge
  order, so the returned :obj:`alpha` is exact.
* **Backward** in two deterministic passes (no atomics): per target node
  (gradients of :math:`\mathbf{V} \mathbf{x}_v`, of the attention vectors,
  and :math:`\delta_v = \sum_u \alpha_{uv} \, d\alpha_{uv}`), then per
  source node over a reverse CSR (gradients of :math:`\mathbf{U}
  \mathbf{x}_u`, :math:`\mathbf{W} \mathbf{x}_u` and of the edge
  projection). Scores and weights are recomputed from the saved
  log-sum-exp.
* **Edge features**: the projection :math:`\mathbf{W}_e \mathbf{e}_{uv}`
  is one :obj:`[E, H * C]` GEMM in PyTorch (cuBLAS runs it at full speed;
  a per-edge :obj:`D`-loop inside the kernel would not), computed in CSR
  order, read by the kernels, freed after the forward and recomputed in
  backward; its gradient, written per edge by pass 2, goes back through two
  GEMMs.
* **Dropout** on the attention weights: a Philox seed drawn from PyTorch's
  (CPU) generator per call, so :func:`torch.manual_seed` reproduces it;
  the mask of edge :obj:`p` (CSR position), head :obj:`h` is
  :obj:`tl.rand(seed, p * H + h) >= p`, the same in forward and backward.
  The kept weights are scaled by :math:`1 / (1 - p)` as
  :func:`torch.nn.functional.dropout` does.
* **Dtypes**: float32, bfloat16 and float16 inputs; every sum in float32.
  The outputs take the dtypes of :func:`chunked_attention`'s.
* **The CSR** (and, at the first backward, the reverse CSR) is built once
  per graph and cached, keyed on the :obj:`src` and :obj:`dst` tensors'
  address, shape, strides and version counter, or on those of the tensor
  they are derived from (:obj:`graph_anchor`: the layer passes its input
  :obj:`edge_index`, from which it builds :obj:`src` and :obj:`dst` with
  the self-loops afresh at every call); the cache holds a reference to the
  keyed tensors, so their address cannot be reused by another tensor while
  the entry lives (:func:`clear_cache` empties it). Building it syncs with
  the device (its sizes depend on the data); the cached path does not.
  Inference tensors (:func:`torch.inference_mode`) have no version counter
  and are never cached.
* **Double backward** (:obj:`create_graph=True`): the backward recomputes
  the attention with the chunked kernels
  (:mod:`torch_geometric_gate.ops.chunked`) under autograd, with the same
  dropout mask, and differentiates that, so gradient penalties work (at
  the chunked kernels' speed).

A target node without unmasked incoming edges gets :obj:`out = 0` (the
reference's softmax would give NaN for a node whose edges are all masked).
"""

import collections
from typing import Optional, Tuple

import torch
from torch import Tensor

#: Edges per block in the kernels' loops; :obj:`None` picks it from the
#: heads and channels (tests set a small one to cover degrees above it).
BLOCK_EDGES: Optional[int] = None

#: Without :obj:`BLOCK_EDGES`, the block holds about this many float32
#: per :obj:`[BLOCK_E, H, C]` tile (registers of 4 warps), in the forward
#: and in the backward kernels, which hold more tiles at once: at 4096
#: ``ptxas`` gives the backward up to 255 registers and spills for sm_90,
#: at 2048 none (``benchmark/triton_compile.py``). ``triton_tune.py``
#: times other values on a GPU.
FORWARD_TILE = 4096
BACKWARD_TILE = 2048

#: The number of graphs whose CSR is cached.
CACHE_SIZE = 4

_cache: 'collections.OrderedDict[tuple, _Graph]' = collections.OrderedDict()


class _Graph:
    r"""The CSR of the incoming edges (sorted by target, stable) and, built
    lazily, the reverse CSR (sorted by source) over the CSR positions."""

    def __init__(self, src: Tensor, dst: Tensor, num_src: int, num_dst: int):
        if src.numel() >= 2**31 or max(num_src, num_dst) >= 2**31:
            raise RuntimeError('The Triton kernels index with int32')
        self.refs = (src, dst)  # Keeps the keyed addresses alive.
        self.num_src, self.num_dst = num_src, num_dst
        self.perm = torch.argsort(dst, stable=True)
        self.src_s = src.index_select(0, self.perm).int()
        self.dst_s = dst.index_select(0, self.perm).int()
        self.rowptr = _rowptr(dst, num_dst)
        self.builds = 1
        self._reverse: Optional[Tuple[Tensor, Tensor]] = None

    def reverse(self) -> Tuple[Tensor, Tensor]:
        if self._reverse is None:
            pos = torch.argsort(self.src_s, stable=True).int()
            self._reverse = (_rowptr(self.src_s, self.num_src), pos)
        return self._reverse


def _rowptr(index: Tensor, num: int) -> Tensor:
    count = torch.bincount(index, minlength=num)[:num]
    rowptr = torch.zeros(num + 1, dtype=torch.int32, device=index.device)
    torch.cumsum(count, 0, out=rowptr[1:])
    return rowptr


def _key(t: Tensor) -> Optional[tuple]:
    if t.is_inference():
        return None
    return (t.data_ptr(), tuple(t.shape), t.stride(), t._version)


def clear_cache() -> None:
    r"""Empties the cache of CSRs (and the references it holds)."""
    _cache.clear()


def csr(
    src: Tensor,
    dst: Tensor,
    num_src: int,
    num_dst: int,
    graph_anchor: Optional[Tuple[Tensor, object]] = None,
) -> '_Graph':
    r"""The cached CSR of the graph :obj:`(src, dst)`, built if missing.
    With :obj:`graph_anchor=(tensor, tag)`, :obj:`src` and :obj:`dst` must
    be a function of that tensor and tag alone (as the layer's edges with
    self-loops are of its input :obj:`edge_index` and
    :obj:`add_self_loops`), and the cache keys on them instead.
    """
    if graph_anchor is None:
        ks, kd = _key(src), _key(dst)
        refs = (src, dst)
        key = None if ks is None or kd is None else (ks, kd)
    else:
        ka = _key(graph_anchor[0])
        refs = (graph_anchor[0],)
        key = None if ka is None else ('anchor', ka, graph_anchor[1])
    if key is None:
        return _Graph(src, dst, num_src, num_dst)
    key = key + (src.numel(), num_src, num_dst, src.device)
    graph = _cache.get(key)
    if graph is None:
        graph = _Graph(src, dst, num_src, num_dst)
        graph.refs = refs  # Keeps the keyed addresses alive.
        _cache[key] = graph
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    return graph


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _block_edges(h_pad: int, c_pad: int, tile: int) -> int:
    if BLOCK_EDGES is not None:
        return BLOCK_EDGES
    return max(1, min(64, tile // (h_pad * c_pad)))


def _num_programs(device: torch.device, n: int) -> int:
    if device.type == 'cuda':
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        return max(1, min(n, 8 * sms))
    return max(1, min(n, 4))


def _edge_projection(edge_attr, weight_edge, perm) -> Optional[Tensor]:
    if edge_attr is None or weight_edge is None:
        return None
    attr = edge_attr.index_select(0, perm)
    return (attr @ weight_edge.t().to(attr.dtype)).contiguous()


class _Settings:
    def __init__(self, graph, kind, slope, p_drop, seed, num_dst, dtypes):
        self.graph, self.kind, self.slope = graph, kind, slope
        self.p_drop, self.seed, self.num_dst = p_drop, seed, num_dst
        self.scale = 0.0 if p_drop >= 1.0 else 1.0 / (1.0 - p_drop)
        self.score_dtype, self.out_dtype = dtypes


def _keep_mask(settings: _Settings, num_edges: int, heads: int, device):
    from torch_geometric_gate.ops import _triton_kernels as k

    keep = torch.ones(num_edges, heads, dtype=torch.int8, device=device)
    if settings.p_drop > 0 and num_edges > 0:
        block = 128
        k.gate_keep_kernel[(_cdiv(num_edges, block),)](
            settings.graph.perm, keep, num_edges, settings.seed,
            settings.p_drop, heads, _pow2(heads), block,
        )  # fmt: skip
    return keep.bool()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class TritonAttention(torch.autograd.Function):
    r"""The autograd function of :func:`triton_attention`; returns
    :obj:`(alpha [E, H], out [N_dst, H, C])`."""

    @staticmethod
    def forward(
        ctx, q_src, q_dst, value, edge_attr, weight_edge, att_neighbor,
        att_self, src, dst, loop, masked, settings,
    ):  # fmt: skip
        from torch_geometric_gate.ops import _triton_kernels as k

        graph = settings.graph
        heads, channels = value.shape[1], value.shape[2]
        h_pad, c_pad = _pow2(heads), _pow2(channels)
        block = _block_edges(h_pad, c_pad, FORWARD_TILE)
        num_edges = graph.perm.numel()
        device = value.device
        q_src_c, q_dst_c, value_c = (
            t.contiguous() for t in (q_src, q_dst, value)
        )
        a_s, a_t = att_neighbor.contiguous(), att_self.contiguous()
        ep = _edge_projection(edge_attr, weight_edge, graph.perm)
        out, lse = _launch_forward(
            graph, settings, q_src_c, q_dst_c, value_c, ep, a_s, a_t
        )
        alpha = torch.empty(
            num_edges, heads, device=device, dtype=settings.score_dtype
        )
        flags = (ep is not None, settings.p_drop > 0)
        common = (settings.seed, settings.p_drop, settings.scale)
        if num_edges > 0:
            block_a = max(block, 16)
            k.gate_alpha_kernel[(_cdiv(num_edges, block_a),)](
                q_src_c, q_dst_c, ep if flags[0] else q_src_c, a_s, a_t,
                graph.src_s, graph.dst_s, settings.kind, graph.perm, lse,
                alpha, num_edges, *common, settings.slope,
                heads, channels, h_pad, c_pad, block_a, *flags,
            )  # fmt: skip
        ctx.save_for_backward(
            q_src, q_dst, value, edge_attr, weight_edge, att_neighbor,
            att_self, src, dst, loop, masked, lse,
        )  # fmt: skip
        ctx.settings = settings
        ctx.set_materialize_grads(False)
        return alpha, out

    @staticmethod
    def backward(ctx, grad_alpha, grad_out):
        saved = ctx.saved_tensors
        settings = ctx.settings
        if torch.is_grad_enabled():
            return (*_double_backward(saved, settings, grad_alpha, grad_out),)
        from torch_geometric_gate.ops import _triton_kernels as k

        (
            q_src, q_dst, value, edge_attr, weight_edge, att_neighbor,
            att_self, _, _, _, _, lse,
        ) = saved  # fmt: skip
        graph = settings.graph
        rev_rowptr, rev_pos = graph.reverse()
        heads, channels = value.shape[1], value.shape[2]
        h_pad, c_pad = _pow2(heads), _pow2(channels)
        block = _block_edges(h_pad, c_pad, BACKWARD_TILE)
        num_edges, num_dst = graph.perm.numel(), settings.num_dst
        num_src = value.shape[0]
        device = value.device
        q_src_c, q_dst_c, value_c = (
            t.contiguous() for t in (q_src, q_dst, value)
        )
        a_s, a_t = att_neighbor.contiguous(), att_self.contiguous()
        ep = _edge_projection(edge_attr, weight_edge, graph.perm)
        if grad_out is None:
            grad_out = torch.zeros(
                num_dst, heads, channels, device=device, dtype=torch.float32
            )
        grad_out = grad_out.contiguous()
        if grad_alpha is not None:
            grad_alpha = grad_alpha.index_select(0, graph.perm).contiguous()
        flags = (
            ep is not None, settings.p_drop > 0, grad_alpha is not None
        )  # fmt: skip
        common = (settings.seed, settings.p_drop, settings.scale)
        f32 = dict(device=device, dtype=torch.float32)
        d_q_dst = torch.zeros(num_dst, heads, channels, **f32)
        delta = torch.zeros(num_dst, heads, **f32)
        programs = _num_programs(device, num_dst)
        g_att = torch.zeros(programs, 2, heads, channels, **f32)
        ep_arg = ep if flags[0] else q_src_c
        ga_arg = grad_alpha if flags[2] else lse
        if num_dst > 0:
            k.gate_bwd_dst_kernel[(programs,)](
                q_src_c, q_dst_c, value_c, ep_arg, a_s, a_t,
                graph.src_s, settings.kind, graph.rowptr, lse, grad_out,
                ga_arg, d_q_dst, delta, g_att,
                num_dst, *common, settings.slope,
                heads, channels, h_pad, c_pad, block, *flags,
            )  # fmt: skip
        d_q_src = torch.zeros(num_src, heads, channels, **f32)
        d_value = torch.zeros(num_src, heads, channels, **f32)
        d_ep = (
            torch.zeros(num_edges, heads * channels, **f32)
            if flags[0]
            else None
        )
        if num_src > 0:
            k.gate_bwd_src_kernel[(num_src,)](
                q_src_c, q_dst_c, value_c, ep_arg, a_s, a_t,
                graph.dst_s, settings.kind, rev_rowptr, rev_pos, lse,
                grad_out, ga_arg, delta, d_q_src, d_value,
                d_ep if flags[0] else d_q_src,
                *common, settings.slope,
                heads, channels, h_pad, c_pad, block, *flags,
            )  # fmt: skip
        need = ctx.needs_input_grad
        g_att = g_att.sum(0)
        d_attr = d_weight = None
        if d_ep is not None:
            if need[3]:
                d_attr = torch.empty_like(edge_attr)
                d_attr[graph.perm] = (d_ep @ weight_edge.to(torch.float32)).to(
                    edge_attr.dtype
                )
            if need[4]:
                attr = edge_attr.index_select(0, graph.perm)
                d_weight = (d_ep.t() @ attr.to(torch.float32)).to(
                    weight_edge.dtype
                )
        return (
            d_q_src.to(q_src.dtype) if need[0] else None,
            d_q_dst.to(q_dst.dtype) if need[1] else None,
            d_value.to(value.dtype) if need[2] else None,
            d_attr,
            d_weight,
            g_att[:1].to(att_neighbor.dtype) if need[5] else None,
            g_att[1:].to(att_self.dtype) if need[6] else None,
            None, None, None, None, None,
        )  # fmt: skip


def _launch_forward(graph, settings, q_src, q_dst, value, ep, a_s, a_t):
    r"""Runs :func:`gate_fwd_kernel` alone (contiguous inputs): returns
    :obj:`out` and the log-sum-exp."""
    from torch_geometric_gate.ops import _triton_kernels as k

    heads, channels = value.shape[1], value.shape[2]
    h_pad, c_pad = _pow2(heads), _pow2(channels)
    num_dst = settings.num_dst
    out = torch.empty(
        num_dst, heads, channels, device=value.device,
        dtype=settings.out_dtype,
    )  # fmt: skip
    lse = torch.empty(num_dst, heads, device=value.device, dtype=torch.float32)
    if num_dst > 0:
        k.gate_fwd_kernel[(num_dst,)](
            q_src, q_dst, value, ep if ep is not None else q_src, a_s, a_t,
            graph.src_s, settings.kind, graph.rowptr, out, lse,
            settings.seed, settings.p_drop, settings.scale, settings.slope,
            heads, channels, h_pad, c_pad,
            _block_edges(h_pad, c_pad, FORWARD_TILE),
            ep is not None, settings.p_drop > 0,
        )  # fmt: skip
    return out, lse


def forward_bytes(
    num_edges: int,
    num_dst: int,
    heads: int,
    channels: int,
    itemsize: int,
    out_itemsize: int = 4,
    edge_features: bool = False,
) -> int:
    r"""The bytes that :func:`gate_fwd_kernel` must move: per edge its
    source index (4) and kind (1), the gathered rows of
    :math:`\mathbf{U} \mathbf{x}_u` and :math:`\mathbf{W} \mathbf{x}_u`
    (and of the edge projection), :obj:`H * C * itemsize` each; per target
    node its row pointer (4) and :math:`\mathbf{V} \mathbf{x}_v`, and the
    writes of :obj:`out` and the float32 log-sum-exp:

    .. math::
        E \, (5 + (2 + [\text{edge}]) \, HCb) + N_{dst} \, (4 + HCb +
        HCb_{out} + 4H)

    Rows gathered by several edges count once per edge (the traffic the
    kernel issues; the L2 cache may serve repeats).
    """
    hcb = heads * channels * itemsize
    per_edge = 5 + (3 if edge_features else 2) * hcb
    per_node = 4 + hcb + heads * channels * out_itemsize + 4 * heads
    return num_edges * per_edge + num_dst * per_node


def _double_backward(saved, settings, grad_alpha, grad_out):
    r"""Recomputes the attention with the chunked kernels under autograd
    (the same dropout mask) and differentiates it with
    :obj:`create_graph=True`."""
    from torch_geometric.utils import softmax

    from torch_geometric_gate.ops.chunked import EdgeAggregate, EdgeScore

    (
        q_src, q_dst, value, edge_attr, weight_edge, att_neighbor, att_self,
        src, dst, loop, masked, _,
    ) = saved  # fmt: skip
    inputs = (
        q_src,
        q_dst,
        value,
        edge_attr,
        weight_edge,
        att_neighbor,
        att_self,
    )
    e = EdgeScore.apply(
        q_src, q_dst, edge_attr, weight_edge, src, dst, loop,
        att_neighbor, att_self, settings.slope,
    )  # fmt: skip
    if masked is not None:
        e = e.masked_fill(masked.view(-1, 1), float('-inf'))
    alpha = softmax(e, dst, num_nodes=settings.num_dst)
    if settings.p_drop > 0:
        keep = _keep_mask(settings, src.numel(), alpha.size(1), alpha.device)
        alpha = alpha * keep.to(alpha.dtype) * settings.scale
    out = EdgeAggregate.apply(value, alpha, src, dst, settings.num_dst)
    outputs, grads = [], []
    for o, g in ((alpha, grad_alpha), (out, grad_out)):
        if g is not None and o.requires_grad:
            outputs.append(o)
            grads.append(g)
    wanted = [t for t in inputs if t is not None and t.requires_grad]
    result = iter(
        torch.autograd.grad(
            outputs, wanted, grads, create_graph=True, allow_unused=True
        )
        if outputs and wanted
        else [None] * len(wanted)
    )
    grads_in = [
        next(result) if t is not None and t.requires_grad else None
        for t in inputs
    ]
    return (*grads_in, None, None, None, None, None)


def triton_attention(
    src: Tensor,
    dst: Tensor,
    q_src: Tensor,
    q_dst: Tensor,
    value: Tensor,
    edge_attr: Optional[Tensor],
    weight_edge: Optional[Tensor],
    loop: Tensor,
    masked: Optional[Tensor],
    att_neighbor: Tensor,
    att_self: Tensor,
    negative_slope: float,
    dropout: float,
    training: bool,
    num_dst: int,
    graph_anchor: Optional[Tuple[Tensor, object]] = None,
) -> Tuple[Tensor, Tensor]:
    r"""GATE's attention with the Triton kernels: returns the attention
    weights :obj:`[E, H]` (in the order of :obj:`src` and :obj:`dst`) and
    the aggregated values :obj:`[N_dst, H, C]`, as
    :func:`~torch_geometric_gate.ops.chunked.chunked_attention` does (see
    :func:`torch_geometric_gate.ops.attend` for the arguments, and
    :func:`csr` for :obj:`graph_anchor`).
    """
    if negative_slope < 0:
        raise ValueError('The Triton kernels need negative_slope >= 0')
    heads = value.size(1)
    graph = csr(src, dst, q_src.size(0), num_dst, graph_anchor)
    kind = loop.to(torch.int8)
    if masked is not None:
        kind = kind + 2 * masked.to(torch.int8)
    kind = kind.index_select(0, graph.perm).contiguous()
    p_drop = float(dropout) if training else 0.0
    seed = 0
    if p_drop > 0:
        if src.numel() * heads >= 2**31:
            raise RuntimeError('Dropout needs E * heads < 2**31')
        seed = int(torch.randint(2**31 - 1, (1,)).item())  # CPU: no sync.
    att_dtype = torch.promote_types(att_neighbor.dtype, att_self.dtype)
    score_dtype = torch.promote_types(q_src.dtype, att_dtype)
    out_dtype = torch.promote_types(value.dtype, score_dtype)
    settings = _Settings(
        graph, kind, float(negative_slope), p_drop, seed, num_dst,
        (score_dtype, out_dtype),
    )  # fmt: skip
    return TritonAttention.apply(
        q_src, q_dst, value, edge_attr, weight_edge, att_neighbor, att_self,
        src, dst, loop, masked, settings,
    )  # fmt: skip


def forward_runner(
    src: Tensor,
    dst: Tensor,
    q_src: Tensor,
    q_dst: Tensor,
    value: Tensor,
    loop: Tensor,
    att_neighbor: Tensor,
    att_self: Tensor,
    negative_slope: float,
    num_dst: int,
):
    r"""A function that runs :func:`gate_fwd_kernel` alone on these inputs
    (no dropout, no edge features; the CSR built up front), for timing it
    against :func:`forward_bytes`."""
    graph = csr(src, dst, q_src.size(0), num_dst)
    kind = loop.to(torch.int8).index_select(0, graph.perm).contiguous()
    dtype = torch.promote_types(q_src.dtype, att_neighbor.dtype)
    settings = _Settings(
        graph, kind, float(negative_slope), 0.0, 0, num_dst,
        (dtype, torch.promote_types(value.dtype, dtype)),
    )  # fmt: skip
    tensors = [
        t.contiguous() for t in (q_src, q_dst, value, att_neighbor, att_self)
    ]

    def run():
        q_s, q_d, v, a_s, a_t = tensors
        return _launch_forward(graph, settings, q_s, q_d, v, None, a_s, a_t)

    return run


__all__ = [
    'clear_cache',
    'csr',
    'forward_bytes',
    'forward_runner',
    'triton_attention',
]
