r"""The chunked kernels' CPU implementation: compiled loops.

Under :func:`torch.compile` the layer calls the custom operators of
:mod:`~torch_geometric_gate.ops.chunked`, whose saved tensors (node
tensors, the edge index, the :obj:`[E, H]` attention weights) keep the
memory of a training step lean. Their bodies are opaque to the compiler:
the chunked ATen loops would leave a compiled GATE at the speed of an eager
one, several times slower than a compiled
:class:`~torch_geometric.nn.conv.GATv2Conv`. On CPU tensors the operators
therefore run the two functions below instead, compiled by Inductor once per
setting (heads and channels compiled in, edge and node counts dynamic): each
gathers, scores, normalizes and scatters in a few fused loops, with the same
results and the same saved tensors.

This module registers them as the operators' CPU kernels (importing
:mod:`~torch_geometric_gate.ops.chunked` imports it), and eager calls run
them too (:func:`eager_forward`, :func:`eager_backward`) where they apply:
on CPU tensors with up to :obj:`SERIAL_MAX_THREADS` threads, a backward
that need not be differentiable, no :mod:`torch.func` transform, and edge
features only while their product with the edge weight fits in a chunk.
Elsewhere, or where no C++ compiler works, eager calls run the chunked ATen
loops.
"""

import threading
import types
import warnings
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from torch_geometric_gate.ops import _compat
from torch_geometric_gate.ops.chunked import aten
from torch_geometric_gate.ops.chunked.aten import (
    dropout_noise,
    index_dtype,
    kept_noise,
    needed_grads,
)
from torch_geometric_gate.ops.chunked.schema import BackwardInputs, Inputs
from torch_geometric_gate.ops.chunked.steps import _activation
from torch_geometric_gate.ops.switch import chunk_size
from torch_geometric_gate.ops.types import edge_flags

_ALL = slice(None)  # All the edges at once: no chunks.


def _forward(
    q_src: Tensor,
    q_dst: Tensor,
    value: Tensor,
    edge_attr: Optional[Tensor],
    weight_edge: Optional[Tensor],
    att: Tensor,
    src: Tensor,
    dst: Tensor,
    loop: Optional[Tensor],
    masked: Optional[Tensor],
    loops_masked_before: Optional[Tensor],
    noise: Optional[Tensor],
    slope: float,
    exact_max: bool,
) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    score_dtype = torch.promote_types(q_src.dtype, att.dtype)
    # Sums accumulate in float32 for half precision (issue 50.3); for
    # float32 and float64 `dtype` is `score_dtype` (the same loops):
    dtype = torch.promote_types(score_dtype, torch.float32)
    num_dst = q_dst.size(0)
    loop, masked = edge_flags(src, dst, loop, masked, loops_masked_before)
    if masked is None:
        masked = torch.zeros_like(loop)
    act = _activation(
        q_src, q_dst, edge_attr, weight_edge, src, dst, _ALL, slope
    )
    vector = torch.where(loop.view(-1, 1, 1), att[1], att[0])
    e = (act.to(dtype) * vector).sum(-1)  # [E, H]
    heads = e.size(1)
    is_masked = masked.view(-1, 1)
    e = e.masked_fill(is_masked, float('-inf'))
    if exact_max:
        shift = e.new_full((num_dst, heads), float('-inf')).scatter_reduce(
            0, dst.view(-1, 1).expand_as(e), e, 'amax'
        )  # -inf where no edge: never read.
    else:
        # The softmax is the same whatever each destination's scores are
        # shifted by. Their mean sums in the loop that computes them; the
        # maximum is a pass of its own, ATen's scatter_reduce. Over its
        # mean no weight underflows (the largest is at least 1); a score
        # above it by more than exp's range overflows the sum, and finite
        # scores whose sum overflows make the mean infinite (every weight
        # 0): `forward` then reruns with the maximum.
        sums = e.new_zeros(num_dst, heads)
        sums = sums.index_add(0, dst, e.masked_fill(is_masked, 0.0))
        count = e.new_zeros(num_dst).index_add(0, dst, (~masked).to(dtype))
        shift = sums / count.clamp(min=1).view(-1, 1)
    alpha = (e - shift.index_select(0, dst)).exp()
    total = e.new_zeros(num_dst, heads).index_add(0, dst, alpha)
    finite = total.isfinite().all()
    if not exact_max:
        finite = finite & shift.isfinite().all()
    total = total + 1e-16
    softmax = alpha / total.index_select(0, dst)
    alpha = softmax if noise is None else softmax * noise
    out_dtype = torch.promote_types(value.dtype, score_dtype)
    sum_dtype = torch.promote_types(out_dtype, dtype)
    msg = value.index_select(0, src).to(sum_dtype) * alpha.unsqueeze(-1)
    out = value.new_zeros((num_dst,) + value.shape[1:], dtype=sum_dtype)
    out = out.index_add(0, dst, msg).to(out_dtype)
    return alpha.to(score_dtype), out, softmax.to(score_dtype), finite


def _backward(
    grad_alpha: Tensor,
    grad_out: Tensor,
    grad_softmax: Tensor,
    q_src: Tensor,
    q_dst: Tensor,
    value: Tensor,
    edge_attr: Optional[Tensor],
    weight_edge: Optional[Tensor],
    att: Tensor,
    loop: Optional[Tensor],
    softmax: Tensor,
    noise: Optional[Tensor],
    src: Tensor,
    dst: Tensor,
    slope: float,
) -> List[Optional[Tensor]]:
    num_dst = grad_out.size(0)
    if loop is None:  # See `types.edge_flags`.
        loop = src == dst
    # Sums in float32 for half precision (for float32 and float64 a no-op):
    dtype = softmax.dtype
    softmax = softmax.to(torch.promote_types(dtype, torch.float32))
    alpha = softmax if noise is None else softmax * noise
    g_dst = grad_out.index_select(0, dst)  # [E, H, C]
    g_x = (g_dst * alpha.unsqueeze(-1)).to(value.dtype)
    grad_value = torch.zeros_like(value).index_add(0, src, g_x)
    x_j = value.index_select(0, src).to(g_dst.dtype)
    g = (g_dst * x_j).sum(-1).to(softmax.dtype) + grad_alpha
    if noise is not None:
        g = g * noise
    g = softmax * (g + grad_softmax)
    total = g.new_zeros(num_dst, g.size(1)).index_add(0, dst, g)
    grad_e = (g - softmax * total.index_select(0, dst)).unsqueeze(-1)
    grad_e = grad_e.to(dtype)
    act = _activation(
        q_src, q_dst, edge_attr, weight_edge, src, dst, _ALL, slope
    )
    is_loop = loop.view(-1, 1, 1)
    vector = torch.where(is_loop, att[1], att[0])
    g_z = (vector * grad_e).to(act.dtype)
    g_z = torch.where(act > 0, g_z, g_z * slope if slope != 0.0 else 0.0)
    grad_src = torch.zeros_like(q_src).index_add(0, src, g_z.to(q_src.dtype))
    grad_dst = torch.zeros_like(q_dst).index_add(0, dst, g_z.to(q_dst.dtype))
    grad_attr = grad_weight = None
    if edge_attr is not None and weight_edge is not None:
        g_flat = g_z.flatten(1)  # (view(E, -1) is ambiguous at E = 0)
        grad_attr = (g_flat @ weight_edge.to(g_flat.dtype)).to(edge_attr.dtype)
        grad_weight = (g_flat.t() @ edge_attr.to(g_flat.dtype)).to(
            weight_edge.dtype
        )
    # The attention vectors' gradient, the sum over the edges of
    # grad_e * act, into row 0 (a_s) or 1 (a_t) by the edge's kind: one
    # scatter fused into the pass that recomputes act, which is then never
    # written out (a product [2H, E] @ [E, H * C] would need it whole).
    grad_att = act.new_zeros((2,) + act.shape[1:], dtype=grad_e.dtype)
    grad_att = grad_att.index_add(0, loop.long(), grad_e * act)
    grad_att = grad_att.to(att.dtype)
    return [grad_src, grad_dst, grad_value, grad_attr, grad_weight, grad_att]


def forward(*args) -> Tuple[Tensor, Tensor, Tensor]:
    r"""The attention weights after dropout (:obj:`noise`), the aggregated
    values :obj:`[N_dst, H, C]` and the softmax before dropout, compiled,
    from :obj:`q_src, q_dst, value, edge_attr, weight_edge, att ([2, H, C]),
    src, dst` (:obj:`int64`), :obj:`loop, masked, loops_masked_before`
    (:func:`~torch_geometric_gate.ops.types.edge_flags`; a 0-dim tensor or
    :obj:`None`), :obj:`noise, slope`."""
    value = args[2]
    alpha, out, softmax, finite = _run(_forward, value, *args, False)
    if not finite:  # A sum overflowed, or a score is not finite:
        alpha, out, softmax, _ = _run(_forward, value, *args, True)
    return alpha, out, softmax


def backward(*args) -> List[Optional[Tensor]]:
    r"""The gradients of :func:`forward`'s :obj:`q_src, q_dst, value,
    edge_attr, weight_edge` (:obj:`None` for the last two without
    :obj:`edge_attr`) and :obj:`att`, compiled, from :obj:`grad_alpha,
    grad_out, grad_softmax` (dense), :obj:`q_src, q_dst, value, edge_attr,
    weight_edge, att, loop, softmax, noise, src, dst, slope`. A
    training step needs them all: no variant is compiled per subset."""
    value = args[5]
    return _run(_backward, value, *args)


_COMPILED: Dict[object, object] = {}
# One compiled call at a time across threads: a call that compiles (a first
# call, a new setting) traces with FX, whose "tracing" flag is
# process-global, and a compiled call in another thread meanwhile raised
# "Detected that you are using FX to symbolically trace a dynamo-optimized
# function" (eager calls from a thread pool on a cold cache, torch 2.11).
# Each call's loops run on every intra-op thread anyway.
_CALL_LOCK = threading.Lock()

# Inductor stores an intermediate that more than 4 loads read (12 summed
# over its inputs on CPU), such as a gathered [E, H, C] row, rather than
# recompute it in every loop that reads it. With several heads the
# backward's loops over the edges then differ in shape ([E, H] reductions
# over C, [E, H * C] scatters) and do not fuse: 7 passes over the edges and
# two [E, H, C] temporaries (`TORCH_LOGS=output_code` prints the loops).
# With these thresholds it recomputes them in 3 passes and writes no
# [E, H, C] temporary, faster with 8 heads at 10^6 edges and as fast at
# 10^5; one head, whose loops fuse anyway, keeps Inductor's defaults, with
# which it is faster (the interleaved timings are in the message of the
# commit that set these). Rechecked with heads and channels compiled in (8
# heads of 8 channels, one thread): Inductor's defaults took 1.30x the step
# at 10^6 edges and 1.01-1.02x at 10^5.
# (The second option's name depends on torch's version, `_compat`.)
SEVERAL_HEADS_OPTIONS = {
    'realize_reads_threshold': 16,
    **_compat.cpu_acc_reads_option(32),
}


# With several threads Inductor parallelizes a loop that scatters into node
# rows (`index_add`) with an atomic add per element (not vectorized). On two
# threads (random graphs of 10^5 and 10^6 edges, heads 1 and 8) the
# compiled step took 0.77-1.42x compiled GATv2Conv's with the parallel
# loops, and 0.44-0.77x with the functions run in one thread
# (`cpp.threads=1`; the commit that set this has the commands). Up to
# `SERIAL_MAX_THREADS` threads they run in one; from there on Inductor's
# parallel loops are left to pay off (not measured past two threads).
SERIAL_MAX_THREADS = 4


def _run(fn, value: Tensor, *args):
    r"""Runs :obj:`fn` compiled by Inductor on :obj:`args`, detached and
    without autograd (the operators' own autograd formula differentiates
    them), so that no setting is compiled twice; with
    :obj:`SEVERAL_HEADS_OPTIONS` where :obj:`value` has several heads, and
    in one thread up to :obj:`SERIAL_MAX_THREADS` threads; one call at a
    time across Python threads (:data:`_CALL_LOCK`).

    The number of heads and channels is compiled in (each pair gets a
    function of its own, see :func:`_for_shape`), the edge and node counts
    are not: a new graph needs no recompilation; a new dtype, slope, or edge
    features and dropout or not, do. Past Dynamo's recompilation limit (per
    heads and channels) a new setting runs uncompiled."""
    heads, channels = value.shape[1:]
    serial = in_one_thread()
    key = (fn, heads, channels, serial)
    compiled = _COMPILED.get(key)
    if compiled is None:
        options = dict(SEVERAL_HEADS_OPTIONS) if heads > 1 else {}
        if serial:
            options['cpp.threads'] = 1
        compiled = torch.compile(
            _for_shape(fn, heads, channels), options=options or None
        )
        _COMPILED[key] = compiled
    args = tuple(a.detach() if isinstance(a, Tensor) else a for a in args)
    for name, arg in zip(fn.__code__.co_varnames, args):
        if isinstance(arg, Tensor) and arg.dim() > 0:
            if name not in _STATIC_ROWS:
                _compat.mark_dynamic(arg, 0)
    # Below autograd whether or not the operator was called through it
    # (Dynamo's guards see the dispatch keys a context leaves a tensor):
    with _CALL_LOCK, torch.no_grad(), _compat.below_autograd():
        return compiled(*args)


# The arguments whose rows are compiled in (the attention parameters); the
# other tensors have a row per edge or per node, compiled dynamic. Heads and
# channels are compiled in: with C known, Inductor's inner loop over the
# channels is a fixed count of vectors with no tail. With 8 heads of 8
# channels a compiled step took 0.78-0.81x (10^5 edges) and 0.71x (10^6)
# the time it took with every size dynamic; with one head of 64, 0.99x
# (random graphs, one thread, medians of alternating steps in one process;
# the message of the commit that wrote this has the runs).
_STATIC_ROWS = ('att', 'weight_edge')


def _for_shape(fn: Callable, heads: int, channels: int) -> Callable:
    r"""A copy of :obj:`fn` with a code object of its own: Dynamo keeps its
    compiled variants, and counts its recompilations, per code object, so
    that each pair of heads and channels has a full recompilation budget
    for its settings (dtype, slope, dropout, edge features)."""
    name = f'{fn.__name__}_{heads}x{channels}'
    code = fn.__code__.replace(co_name=name)
    return types.FunctionType(
        code, fn.__globals__, name, fn.__defaults__, fn.__closure__
    )


# The operators' kernels on CPU tensors: the functions above, compiled (the
# chunked loops of `aten` are opaque to the compiler and would set a
# compiled GATE's pace); same outputs, same saved tensors. They write no
# [E, H, C] temporary but with edge features (the product with the edge
# weight takes the score gradient whole); the chunks write chunk-sized ones.
# Past `KernelSettings.loops_max_elements` edge elements (edges times
# `heads * out_channels`, 2^27 by default) the operators run the chunks, so
# that a step's peak stays bounded where the fused functions are not
# measured. At 1.1 * 10^6 edges * 64 (random-1e6 with its self-loops, one
# thread) the fused functions ran the compiled step in 0.35x / 0.81x
# compiled GATv2Conv's time (one / 8 heads; benchmark/results/cpu-pair.md
# at 20141ac; 0.29x / 0.54x in today's, 13f356f), where the chunks had run
# it in 0.45x / 1.16x (cpu-pair.md at f63d872, before c3313a2).


def _fused(src: Tensor, value: Tensor, max_elements: int) -> bool:
    return src.numel() * value.size(1) * value.size(2) <= max_elements


def in_one_thread() -> bool:
    r"""Whether the compiled functions run in one thread (up to
    :obj:`SERIAL_MAX_THREADS` threads), and so may run eager calls."""
    return torch.get_num_threads() <= SERIAL_MAX_THREADS


def cpu_attention(i: Inputs):
    r"""The operator's CPU kernel: :func:`forward`, or the chunked ATen
    loops past :obj:`i.loops_max_elements`."""
    if not _fused(i.src, i.value, i.loops_max_elements):
        return aten.forward(i)
    src, dst = i.src.long(), i.dst.long()
    dtype = torch.promote_types(i.q_src.dtype, i.att_self.dtype)
    noise = None
    if i.dropout > 0.0:
        shape = [src.numel(), i.att_self.size(1)]
        like = i.q_src.new_empty(0, dtype=dtype)
        noise = dropout_noise(shape, i.dropout, like)
    # A tensor: an int would be compiled in.
    before = None
    if i.loops_masked_before > 0:
        before = torch.tensor(i.loops_masked_before)
    alpha, out, softmax = forward(
        i.q_src, i.q_dst, i.value, i.edge_attr, i.weight_edge,
        torch.cat([i.att_neighbor, i.att_self]), src, dst, i.loop, i.masked,
        before, noise, i.negative_slope,
    )  # fmt: skip
    if noise is None:
        softmax = alpha.new_empty(0, i.att_self.size(1))
    edges = torch.stack([src, dst]).to(index_dtype(i.q_src.size(0), i.num_dst))
    return alpha, out, softmax, edges


def cpu_attention_backward(i: BackwardInputs):
    r"""The backward operator's CPU kernel: :func:`backward`, or the
    chunked ATen loops past :obj:`i.loops_max_elements`."""
    if not _fused(i.edges[0], i.value, i.loops_max_elements):
        return aten.backward(i)
    src, dst = i.edges[0].long(), i.edges[1].long()
    alpha, softmax, noise = i.alpha, i.softmax, None
    if i.dropout > 0.0:
        noise = kept_noise(alpha, i.dropout)
    else:
        softmax = alpha
    # Dense gradients (one compiled setting whatever autograd passes):
    grad_alpha, grad_out, grad_softmax = i.grad_alpha, i.grad_out, None
    if grad_alpha is None:
        grad_alpha = torch.zeros_like(alpha)
    if grad_out is None:
        shape = (i.num_dst, i.value.size(1), i.value.size(2))
        grad_out = alpha.new_zeros(shape)
    if i.grad_softmax is not None and i.grad_softmax.numel() > 0:
        grad_softmax = i.grad_softmax
    if grad_softmax is None:
        grad_softmax = torch.zeros_like(softmax)
    grad_alpha, grad_out = grad_alpha.contiguous(), grad_out.contiguous()
    grad_softmax = grad_softmax.contiguous()
    grads = backward(
        grad_alpha, grad_out, grad_softmax, i.q_src, i.q_dst, i.value,
        i.edge_attr, i.weight_edge, torch.cat([i.att_neighbor, i.att_self]),
        i.loop, softmax, noise, src, dst, i.negative_slope,
    )  # fmt: skip
    return needed_grads(grads, i.need)


# Eager calls ---------------------------------------------------------------

# Eager calls on CPU tensors run the compiled functions as the operators do
# (unless `KernelSettings.eager_loops` is off): a few loops instead of some
# 26 ATen operations per chunk of edges, each of which waits for every
# intra-op thread, as a CPU that another process keeps busy punishes
# (`benchmark/contention.py`, the benchmark page of the docs).
# Whether a compilation failed (no working C++ compiler): eager calls then
# run the chunks from there on.
_compiler_failed = False


def _eager_applies(tensors) -> bool:
    if _compiler_failed or not in_one_thread():
        return False
    # `create_graph=True` differentiates the backward: the chunked loops'.
    if torch.is_grad_enabled():
        return False
    tensors = [t for t in tensors if isinstance(t, Tensor)]
    # Wrapped tensors (torch.func, batched gradients) are not for compiled
    # code:
    return all(
        t.device.type == 'cpu' for t in tensors
    ) and not _compat.wrapped(*tensors)


def _edge_product_fits(
    edge_attr: Optional[Tensor], value: Tensor, chunk: int
) -> bool:
    # With edge features the compiled loops write their product with the
    # edge weight, [E, H * C], whole (on 10^6 edges with 16 features the
    # eager step's peak RSS rose from 867 to 1475 MB); eager calls keep it
    # no larger than a chunk.
    if edge_attr is None:
        return True
    width = value.size(1) * value.size(2)
    return edge_attr.size(0) * width <= chunk_size(chunk, value.device)


def _eager(kernel: Callable, fallback: Callable, i, fits: bool):
    global _compiler_failed
    if fits and _eager_applies(i):
        try:
            return kernel(i)
        except _compat.CompilerFailed as error:  # No working C++ compiler.
            _compiler_failed = True
            warnings.warn(
                'GATEConv: compiling the CPU attention kernels failed, eager '
                'calls run the slower chunked ATen loops from now on. '
                f'The error was: {error}',
                stacklevel=2,
            )
    return fallback(i)


def eager_forward(i: Inputs, eager_loops: bool):
    r"""The eager forward: the compiled functions where they apply (and
    :obj:`eager_loops`), else the chunked ATen loops."""
    fits = eager_loops and _edge_product_fits(i.edge_attr, i.value, i.chunk)
    return _eager(cpu_attention, aten.forward, i, fits)


def eager_backward(i: BackwardInputs, eager_loops: bool):
    r"""The eager backward: the compiled functions where they apply (and
    :obj:`eager_loops`), else the chunked ATen loops (differentiable)."""
    fits = eager_loops and _edge_product_fits(i.edge_attr, i.value, i.chunk)
    return _eager(cpu_attention_backward, aten.backward, i, fits)
