r"""The chunked kernels (:mod:`torch_geometric_gate.ops.chunked`) against an
independent dense float64 computation of GATE's attention, eager and under
:func:`torch.compile` (the custom operators), and through the layer.
"""

import itertools
import re
from typing import Dict, Optional, Tuple

import pytest
import torch
from conv_testing import (
    EDGE_INDEX,
    NUM_NODES,
    randomize_attention,
    saved_bytes,
    selected_kernel,
)
from torch import Tensor
from torch_geometric.nn import GATv2Conv

from torch_geometric_gate import GATEConv
from torch_geometric_gate.ops import (
    AttentionInputs,
    attention_kernel,
    current_settings,
    gate_attention,
    switch,
)
from torch_geometric_gate.ops.chunked import chunked_attention
from torch_geometric_gate.ops.chunked import loops as fused
from torch_geometric_gate.ops.chunked.steps import EdgeAggregate, EdgeScore
from torch_geometric_gate.ops.types import AttentionGraph, AttentionParams

NAMES = ('q_src', 'q_dst', 'value', 'edge_attr', 'weight_edge',
         'att_neighbor', 'att_self')  # fmt: skip


def make_graph(bipartite: bool = False, add_self_loops: bool = True):
    r"""A small graph built as :class:`GATEConv` builds it: node 0 has a
    high in-degree, the last node has no input edge, the input's self-loops
    (node 2's, twice) are masked and fresh ones appended; :obj:`bipartite`
    has 7 source and 4 target nodes (and scores no edge as a loop without
    :obj:`add_self_loops`)."""
    src = torch.tensor([1, 2, 3, 4, 5, 0, 1, 2, 3, 0, 2, 4, 3, 1, 2, 2, 5])
    dst = torch.tensor([0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 1, 2, 1, 3, 2, 2, 0])
    num_src, num_dst = (7, 4) if bipartite else (7, 7)
    keep = dst < num_dst
    src, dst = src[keep], dst[keep]
    if add_self_loops:
        input_loop = src == dst
        num_loops = min(num_src, num_dst) - 1  # The last node has none.
        loops = torch.arange(num_loops)
        src, dst = torch.cat([src, loops]), torch.cat([dst, loops])
        loop = torch.cat([input_loop, torch.ones(num_loops, dtype=bool)])
        masked = torch.cat([input_loop, torch.zeros(num_loops, dtype=bool)])
    else:
        num_loops, masked = 0, None
        loop = torch.zeros_like(src, dtype=bool) if bipartite else src == dst
    return AttentionGraph(src, dst, loop, masked, num_src, num_dst, num_loops)


def make_inputs(graph, heads, channels, edge_dim, seed=0):
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape):
        t = torch.randn(*shape, generator=gen, dtype=torch.double)
        return t.requires_grad_()

    num_edges = graph.src.numel()
    return {
        'q_src': rand(graph.num_src, heads, channels),
        'q_dst': rand(graph.num_dst, heads, channels),
        'value': rand(graph.num_src, heads, channels),
        'edge_attr': rand(num_edges, edge_dim) if edge_dim else None,
        'weight_edge': rand(heads * channels, edge_dim) if edge_dim else None,
        'att_neighbor': rand(1, heads, channels),
        'att_self': rand(1, heads, channels),
    }


def params_of(inputs, slope=0.0, dropout=0.0, training=False):
    return AttentionParams(
        inputs['att_neighbor'], inputs['att_self'], inputs['weight_edge'],
        slope, dropout, training,
    )  # fmt: skip


def attend(graph, params, q_src, q_dst, value, edge_attr):
    r"""The chunked kernels under the settings in force, as
    :obj:`(alpha, out)`."""
    inputs = AttentionInputs(q_src, q_dst, value, edge_attr)
    out, alpha = chunked_attention(graph, params, inputs, current_settings())
    return alpha, out


def run(graph, inputs, slope=0.0, dropout=0.0, training=False):
    return attend(
        graph, params_of(inputs, slope, dropout, training), inputs['q_src'],
        inputs['q_dst'], inputs['value'], inputs['edge_attr'],
    )  # fmt: skip


def use(monkeypatch, **options):
    r"""Sets the switch's options for the rest of the test."""
    settings = current_settings()._replace(**options)
    monkeypatch.setattr(switch._STATE.selection, 'settings', settings)


def dense(graph, inputs, slope, noise: Optional[Tensor] = None):
    r"""GATE's attention with a dense :obj:`[N_dst, E]` incidence matrix and
    :func:`torch.softmax` (no scatter, no gather kernel, no chunks)."""
    i = inputs
    src, dst = graph.src, graph.dst
    z = i['q_src'][src] + i['q_dst'][dst]
    if i['edge_attr'] is not None:
        z = z + (i['edge_attr'] @ i['weight_edge'].t()).view_as(z)
    act = torch.where(z > 0, z, slope * z)
    att = torch.where(graph.loop[:, None, None], i['att_self'],
                      i['att_neighbor'])  # fmt: skip
    score = (act * att).sum(-1)  # [E, H]
    nodes = torch.arange(graph.num_dst)
    member = dst[None, :] == nodes[:, None]  # [N, E]
    if graph.masked is not None:
        member = member & ~graph.masked[None, :]
    scores = torch.where(member[..., None], score[None], float('-inf'))
    weight = torch.softmax(scores, dim=1).nan_to_num(0.0)  # [N, E, H]
    alpha = weight.sum(0)
    if noise is not None:
        alpha = alpha * noise
    incidence = (dst[None, :] == nodes[:, None]).double()
    out = torch.einsum(
        'ne,ehc->nhc', incidence, alpha[..., None] * i['value'][src]
    )
    return alpha, out


def gradients(outputs, inputs, seed=1, create_graph=False):
    gen = torch.Generator().manual_seed(seed)
    grads = [
        torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in outputs
    ]
    wanted = [inputs[k] for k in NAMES if inputs[k] is not None]
    got = iter(
        torch.autograd.grad(outputs, wanted, grads, create_graph=create_graph)
    )
    return {k: next(got) for k in NAMES if inputs[k] is not None}


def assert_equal_to(got_outputs, want_outputs, inputs, atol=1e-10):
    for what, a, b in zip(('alpha', 'out'), got_outputs, want_outputs):
        torch.testing.assert_close(a, b, atol=atol, rtol=0, msg=what)
    got, want = gradients(got_outputs, inputs), gradients(want_outputs, inputs)
    assert got.keys() == want.keys()
    for k in want:
        torch.testing.assert_close(
            got[k], want[k], atol=atol, rtol=1e-8, msg=k
        )


CASES = [  # heads, channels, edge_dim, slope, bipartite, add_self_loops
    (1, 4, None, 0.0, False, True),
    (3, 2, 3, 0.0, False, True),
    (2, 3, None, 0.2, False, False),
    (2, 3, 2, 0.2, True, True),
    (2, 2, None, 0.0, True, False),
]


def eager_path(monkeypatch, path: str) -> list:
    r"""Makes eager calls run :obj:`path`: :obj:`'compiled'` (the functions
    of :mod:`~torch_geometric_gate.ops.chunked.loops`), :obj:`'chunks'`
    (the chunked ATen loops); returns the list of the compiled functions
    run."""
    calls, run_compiled = [], fused._run

    def spy(fn, *args):
        calls.append(fn.__name__)
        return run_compiled(fn, *args)

    monkeypatch.setattr(fused, '_run', spy)
    use(monkeypatch, eager_loops=path == 'compiled')
    return calls


@pytest.mark.parametrize('path', ['compiled', 'chunks'])
@pytest.mark.parametrize('bipartite', [False, True])
def test_chunked_attention_derives_the_flags_of_add_self_loops(
    monkeypatch, path, bipartite
):
    # Under add_self_loops the layer passes `loop=None` and
    # `mask_input_loops`: the kernels flag the edges with src == dst as
    # loops, and mask those before the appended ones, as given flags would.
    calls = eager_path(monkeypatch, path)
    graph = make_graph(bipartite)
    derived = graph._replace(loop=None, masked=None, mask_input_loops=True)
    loop, masked = derived.flags()
    assert torch.equal(loop, graph.loop) and torch.equal(masked, graph.masked)
    inputs = make_inputs(graph, 2, 3, 2)
    got = run(derived, inputs, 0.2)
    assert_equal_to(got, dense(graph, inputs, 0.2), inputs)
    assert len(calls) == (2 if path == 'compiled' else 0)


def compile_counter():
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    return CompileCounterWithBackend('aot_eager')


def layer_attention(graph, slope, dropout, training):
    r"""A function that builds GATE's attention from node features as the
    layer does (projections, input self-loops masked, loops appended) and
    runs the chunked kernels, to compile. As the layer does, it leaves the
    kernels to derive the self-loop flags (:obj:`loop=None`,
    :obj:`mask_input_loops`)."""

    def fn(x, weights, att_neighbor, att_self, edge_index):
        num_nodes = x.size(0)
        heads, channels = att_self.shape[1:]
        value, q_src, q_dst = (
            (x @ w.t()).view(-1, heads, channels) for w in weights
        )
        loops = torch.arange(num_nodes)
        ei = torch.cat([edge_index, loops.repeat(2, 1)], dim=1)
        g = AttentionGraph(
            ei[0], ei[1], None, None, num_nodes, num_nodes, num_nodes,
            mask_input_loops=True,
        )  # fmt: skip
        p = AttentionParams(
            att_neighbor, att_self, None, slope, dropout, training
        )
        return attend(g, p, q_src, q_dst, value, None)

    return fn


def layer_inputs(heads=2, channels=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    kw = dict(generator=gen, dtype=torch.double)
    x = torch.randn(NUM_NODES, 5, **kw).requires_grad_()
    weights = [
        torch.randn(heads * channels, 5, **kw).requires_grad_()
        for _ in range(3)
    ]
    att = [
        torch.randn(1, heads, channels, **kw).requires_grad_()
        for _ in range(2)
    ]
    edge_index = torch.cat([EDGE_INDEX, torch.tensor([[4], [4]])], dim=1)
    return x, weights, att, edge_index


def layer_dense(x, weights, att, edge_index, slope, noise=None):
    heads, channels = att[0].shape[1:]
    value, q_src, q_dst = (
        (x @ w.t()).view(-1, heads, channels) for w in weights
    )
    n = x.size(0)
    input_loop = edge_index[0] == edge_index[1]
    src = torch.cat([edge_index[0], torch.arange(n)])
    dst = torch.cat([edge_index[1], torch.arange(n)])
    graph = AttentionGraph(
        src, dst, torch.cat([input_loop, torch.ones(n, dtype=bool)]),
        torch.cat([input_loop, torch.zeros(n, dtype=bool)]), n, n, n,
    )  # fmt: skip
    inputs = dict(
        q_src=q_src,
        q_dst=q_dst,
        value=value,
        edge_attr=None,
        weight_edge=None,
        att_neighbor=att[0],
        att_self=att[1],
    )
    return dense(graph, inputs, slope, noise)


def layer_grads(outputs, x, weights, att, seed=1):
    gen = torch.Generator().manual_seed(seed)
    grads = [
        torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in outputs
    ]
    return torch.autograd.grad(outputs, [x, *weights, *att], grads)


def compiled_graph_ops(counter):
    return '\n'.join(g.code for g in counter.graphs)


@pytest.mark.parametrize('slope', [0.0, 0.2])
def test_chunked_attention_compiles_fullgraph_equal_to_dense(slope):
    x, weights, att, edge_index = layer_inputs()
    counter = compile_counter()
    fn = layer_attention(None, slope, 0.0, True)
    compiled = torch.compile(fn, fullgraph=True, backend=counter)
    got = compiled(x, weights, *att, edge_index)
    assert counter.frame_count == 1  # One graph, no break.
    # The kernels ran as the custom operator, not traced into the graph:
    code = compiled_graph_ops(counter)
    assert 'torch_geometric_gate.chunked_attention' in code
    assert 'index_add' not in code and 'scatter' not in code
    want = layer_dense(x, weights, att, edge_index, slope)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)
    for a, b in zip(
        layer_grads(got, x, weights, att), layer_grads(want, x, weights, att)
    ):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)


@pytest.mark.slow
def test_chunked_attention_compiles_with_inductor_equal_to_dense():
    x, weights, att, edge_index = layer_inputs(heads=3, channels=2)
    torch._dynamo.reset()
    fn = layer_attention(None, 0.0, 0.0, True)
    got = torch.compile(fn, fullgraph=True)(x, weights, *att, edge_index)
    want = layer_dense(x, weights, att, edge_index, 0.0)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)
    for a, b in zip(
        layer_grads(got, x, weights, att), layer_grads(want, x, weights, att)
    ):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)


def dropout_run(fn, x, weights, att, edge_index, seed):
    torch.manual_seed(seed)
    alpha, out = fn(x, weights, *att, edge_index)
    return (alpha, out), layer_grads((alpha, out), x, weights, att)


@pytest.mark.parametrize('compiled', [False, True])
def test_chunked_dropout_seeded_and_the_same_mask_in_backward(compiled):
    p = 0.5
    x, weights, att, edge_index = layer_inputs()
    fn = layer_attention(None, 0.0, p, True)
    if compiled:
        fn = torch.compile(fn, fullgraph=True, backend=compile_counter())
    (alpha, out), grads = dropout_run(fn, x, weights, att, edge_index, 3)
    # `torch.manual_seed` reproduces the mask:
    (alpha2, out2), grads2 = dropout_run(fn, x, weights, att, edge_index, 3)
    assert torch.equal(alpha, alpha2) and torch.equal(out, out2)
    for a, b in zip(grads, grads2):
        assert torch.equal(a, b)
    other = dropout_run(fn, x, weights, att, edge_index, 4)[0][0]
    assert not torch.equal(alpha, other)
    # The weights are the softmax's, kept or scaled by 1 / (1 - p):
    full = layer_dense(x, weights, att, edge_index, 0.0)[0]
    keep = alpha != 0
    assert 0 < keep.sum() < (full != 0).sum()  # Dropout did act.
    noise = keep.double() / (1 - p)
    want = layer_dense(x, weights, att, edge_index, 0.0, noise)
    for a, b in zip((alpha, out), want):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)
    # The backward applied the forward's mask:
    for a, b in zip(grads, layer_grads(want, x, weights, att)):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)


def test_chunked_double_backward_keeps_the_dropout_mask():
    graph = make_graph()
    inputs = make_inputs(graph, 2, 3, 2)
    firsts = []
    for create_graph in (False, True):
        torch.manual_seed(3)
        outputs = run(graph, inputs, 0.0, 0.5, True)
        firsts.append(gradients(outputs, inputs, create_graph=create_graph))
    for k in firsts[0]:
        torch.testing.assert_close(firsts[0][k], firsts[1][k], atol=0, rtol=0)


@pytest.mark.parametrize('path', ['compiled', 'chunks'])
@pytest.mark.parametrize('slope,dropout', [(0.0, 0.0), (0.2, 0.0), (0.0, 0.4)])
def test_chunked_attention_gradgradcheck_across_chunks(
    monkeypatch, path, slope, dropout
):
    # The compiled forward's outputs and saved tensors serve the chunks'
    # backward too, which `create_graph=True` (and batched gradients) run.
    # Chunks of 3 edges for the chunks (with edge features the compiled
    # loops run eager calls only where a chunk holds every edge).
    calls = eager_path(monkeypatch, path)
    if path == 'chunks':
        use(monkeypatch, chunk_elements=3 * 2 * 2)
    graph = make_graph()
    inputs = make_inputs(graph, 2, 2, 2)
    present = [k for k in NAMES if inputs[k] is not None]

    def fn(*tensors):
        torch.manual_seed(0)  # One dropout mask for every evaluation.
        i = dict(inputs, **dict(zip(present, tensors)))
        return run(graph, i, slope, dropout, True)

    tensors = tuple(inputs[k] for k in present)
    # fast_mode: the Jacobians against random projections (PyTorch's
    # fast gradcheck), a fraction of the full Jacobians' evaluations.
    check = dict(check_batched_grad=True, fast_mode=True)
    assert torch.autograd.gradcheck(fn, tensors, **check)
    # The backward is differentiable (gradient penalties):
    assert torch.autograd.gradgradcheck(fn, tensors, **check)
    # Forward and first-order backward on the compiled loops, or never:
    assert set(calls) == ({'_forward', '_backward'} if path == 'compiled'
                          else set())  # fmt: skip


def test_chunked_attention_under_torch_func_grad():
    from torch.func import grad

    graph = make_graph()
    inputs = make_inputs(graph, 2, 3, 2)
    present = [k for k in NAMES if inputs[k] is not None]

    def loss(*tensors):
        alpha, out = run(graph, dict(inputs, **dict(zip(present, tensors))))
        return out.square().sum() + alpha.square().sum()

    tensors = tuple(inputs[k] for k in present)
    got = grad(loss, argnums=tuple(range(len(present))))(*tensors)
    alpha, out = dense(graph, inputs, 0.0)
    want = torch.autograd.grad(
        out.square().sum() + alpha.square().sum(), tensors
    )
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)


def op_args(graph, inputs, slope=0.0, dropout=0.0):
    return (
        inputs['q_src'], inputs['q_dst'], inputs['value'], inputs['edge_attr'],
        inputs['weight_edge'], inputs['att_neighbor'], inputs['att_self'],
        graph.src, graph.dst, graph.loop, graph.masked,
        graph.loops_masked_before, graph.num_dst, slope, dropout,
        0, current_settings().loops_max_elements,
    )  # fmt: skip


@pytest.mark.parametrize('derived', [False, True])
@pytest.mark.parametrize('edge_dim,slope', [(None, 0.0), (2, 0.2)])
def test_chunked_custom_ops_pass_opcheck(edge_dim, slope, derived):
    graph = make_graph()
    if derived:  # The flags left to the operators (see the layer):
        graph = graph._replace(loop=None, masked=None, mask_input_loops=True)
    inputs = make_inputs(graph, 2, 3, edge_dim)
    op = torch.ops.torch_geometric_gate.chunked_attention
    torch.library.opcheck(op, op_args(graph, inputs, slope))
    alpha, out, softmax, edges = op(*op_args(graph, inputs, slope))
    assert edges.dtype == torch.int32 and softmax.numel() == 0
    backward = torch.ops.torch_geometric_gate.chunked_attention_backward
    args = (
        torch.randn_like(alpha), torch.randn_like(out), None,
        *op_args(graph, inputs)[:7], graph.loop, alpha, softmax, edges,
        graph.num_dst, slope, 0.0, 0, 2**27, [True] * 7,
    )  # fmt: skip
    # Detached: its own backward is not registered (see the module).
    args = tuple(a.detach() if isinstance(a, Tensor) else a for a in args)
    torch.library.opcheck(backward, args)
    grads = backward(*args)
    assert [g.shape for g in grads] == [
        t.shape for t in op_args(graph, inputs)[:7] if t is not None
    ]


def test_compiled_loops_run_one_call_at_a_time_across_threads(monkeypatch):
    # A call that compiles traces with FX, whose flag is process-global: a
    # compiled call in another thread meanwhile raised "Detected that you
    # are using FX to symbolically trace a dynamo-optimized function" (8
    # threads' first eager calls, torch 2.11). The calls take turns; a
    # stand-in for torch.compile records how many run at once.
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    state = {'now': 0, 'most': 0}
    lock = threading.Lock()

    def compiled(*args):
        with lock:
            state['now'] += 1
            state['most'] = max(state['most'], state['now'])
        time.sleep(0.02)
        with lock:
            state['now'] -= 1
        return args[0]

    monkeypatch.setattr(fused, '_COMPILED', {})
    monkeypatch.setattr(torch, 'compile', lambda fn, **kwargs: compiled)
    value = torch.zeros(3, 2, 4)

    def job(i):
        return fused._run(fused._forward, value, torch.full((2,), i))

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(job, range(16)))
    assert [int(r[0]) for r in results] == list(range(16))
    assert state['most'] == 1


@pytest.mark.parametrize('dropout', [0.0, 0.5])
def test_chunked_operator_returns_no_cpu_tensor(dropout):
    # The operator returned a dropout seed as a CPU tensor (empty without
    # dropout): an operator with a CPU output is left out of a CUDA graph
    # (torch.compile(mode='reduce-overhead')). The backward reads the mask
    # back from the weights. Fake CUDA tensors here.
    from torch._subclasses.fake_tensor import FakeTensorMode

    graph = make_graph()
    args = op_args(graph, make_inputs(graph, 2, 3, 2), dropout=dropout)
    with FakeTensorMode():
        args = [
            torch.empty(a.shape, dtype=a.dtype, device='cuda')
            if isinstance(a, Tensor)
            else a
            for a in args
        ]
        outputs = torch.ops.torch_geometric_gate.chunked_attention(*args)
    assert [t.device.type for t in outputs] == ['cuda'] * len(outputs)


class _ScalarReads(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.reads = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.reads += func.overloadpacket.__name__ == '_local_scalar_dense'
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize('eager_loops', [False, True])
def test_chunked_dropout_adds_no_scalar_read(eager_loops):
    # The dropout mask was drawn from a seed read with .item() by a
    # generator built per call, in forward and again in backward: a host
    # read of every call, and a fixed mask in a CUDA graph. Forward draws it
    # with the device's generator; backward reads it back from the weights.
    # (The CPU kernels read whether scores are finite: the same reads
    # without dropout.)
    reads = []
    for dropout in (0.0, 0.5):
        torch.manual_seed(0)
        conv = GATEConv(8, 4, heads=2, dropout=dropout)
        x = torch.randn(30, 8, requires_grad=True)
        edge_index = torch.randint(0, 30, (2, 120))
        with attention_kernel('chunked', eager_loops=eager_loops):
            conv(x, edge_index).sum().backward()  # (The loops compiled.)
            with _ScalarReads() as mode:
                conv(x, edge_index).sum().backward()
            _, (_, alpha) = conv(x, edge_index, return_attention_weights=True)
        reads.append(mode.reads)
    assert (alpha == 0).any()  # Dropout did act.
    assert reads[1] == reads[0]


@pytest.mark.parametrize('loops_max_elements', [0, 2**27])
def test_chunked_backward_operator_returns_the_strides_it_declares(
    loops_max_elements,
):
    # Inputs of permuted strides (gate_attention takes any): the fake
    # implementation declared gradients of their strides (`empty_like`),
    # the kernels returned contiguous ones, and Inductor's compiled backward
    # failed its stride assertion ("incorrect fake (aka meta) kernel").
    graph = make_graph()
    inputs = make_inputs(graph, 2, 3, 2)
    for name, t in inputs.items():  # The same values, permuted strides:
        dims = list(reversed(range(t.dim())))
        inputs[name] = t.detach().permute(dims).contiguous().permute(dims)
        assert not inputs[name].is_contiguous(), name
    op = torch.ops.torch_geometric_gate.chunked_attention
    alpha, out, softmax, edges = op(*op_args(graph, inputs))
    backward = torch.ops.torch_geometric_gate.chunked_attention_backward
    for grad_out, need in (
        (torch.randn_like(out), [True] * 7),
        (None, [False, False, True] + [False] * 4),  # Only the value's.
    ):
        args = (
            torch.randn_like(alpha), grad_out, None,
            *op_args(graph, inputs)[:7], graph.loop, alpha, softmax, edges,
            graph.num_dst, 0.0, 0.0, 0, loops_max_elements, need,
        )  # fmt: skip
        torch.library.opcheck(backward, args)


@pytest.mark.slow
@pytest.mark.parametrize(
    'heads,channels,edge_dim,slope,bipartite,loops',
    # One head, ReLU; two heads, edge features, slope 0.2, bipartite:
    [CASES[0], CASES[3]],
)
def test_cpu_operator_equals_dense_and_the_eager_dropout(
    heads, channels, edge_dim, slope, bipartite, loops
):
    # On CPU tensors the operator that torch.compile calls runs the
    # Inductor-compiled functions of `ops.chunked.loops`: outputs and every
    # gradient equal the dense computation (float64), and with dropout the
    # eager kernels' for the same seed.
    graph = make_graph(bipartite, loops)
    inputs = make_inputs(graph, heads, channels, edge_dim)
    op = torch.ops.torch_geometric_gate.chunked_attention
    got = op(*op_args(graph, inputs, slope))[:2]
    assert_equal_to(got, dense(graph, inputs, slope), inputs)
    torch.manual_seed(3)
    got = op(*op_args(graph, inputs, slope, dropout=0.4))[:2]
    torch.manual_seed(3)
    want = run(graph, inputs, slope, dropout=0.4, training=True)
    assert_equal_to(got, want, inputs)
    assert (got[0] == 0).any()  # Some attention weights were dropped.


@pytest.mark.parametrize('scale,reruns', [(1.0, False), (1e4, True)])
def test_cpu_operator_shifts_by_the_mean_then_by_the_maximum(
    monkeypatch, scale, reruns
):
    # The compiled forward shifts each destination's scores by their mean.
    # Scores spread past exp's range (float64: 709) overflow that sum: the
    # forward reruns, shifted by the maximum. Both equal the dense softmax.
    graph = make_graph()
    inputs = make_inputs(graph, 2, 3, None)
    with torch.no_grad():
        inputs['att_neighbor'].mul_(scale)
        inputs['att_self'].mul_(scale)
    by_max, run_fused = [], fused._run

    def spy(fn, *args):
        if fn is fused._forward:
            by_max.append(args[-1])
        return run_fused(fn, *args)

    monkeypatch.setattr(fused, '_run', spy)
    op = torch.ops.torch_geometric_gate.chunked_attention
    got = op(*op_args(graph, inputs))[:2]
    assert by_max == ([False, True] if reruns else [False])
    assert torch.isfinite(got[1]).all()
    assert_equal_to(got, dense(graph, inputs, 0.0), inputs)


def test_finite_scores_whose_sum_overflows_rerun_by_the_maximum(monkeypatch):
    # Each score below float32's largest, their sum not: the mean shift was
    # +inf, every weight exp(-inf) = 0, the sum 0 (finite): no rerun, and
    # all-zero attention and outputs.
    calls = eager_path(monkeypatch, 'compiled')
    q = torch.full((3, 1, 1), 5e37)
    q[0] = 7.5e37
    value = torch.tensor([1.0, 2.0, 3.0]).view(3, 1, 1)
    edge_index = torch.tensor([[0, 1, 2, 1], [2, 2, 2, 2]])
    a = torch.ones(1, 1)
    got = {}
    for kernel in ('chunked', 'reference'):
        with attention_kernel(kernel):
            got[kernel] = gate_attention(
                q, q, value, edge_index, a, a, need_weights=True
            )
    assert calls  # the compiled loops ran
    torch.testing.assert_close(got['chunked'], got['reference'])
    assert got['chunked'][1].sum() == 1.0


@pytest.mark.parametrize('heads', [1, 3])
def test_eager_layer_on_the_compiled_loops_equals_the_reference(
    monkeypatch, heads
):
    # GATEConv's default eager path on CPU: the compiled loops, forward and
    # backward; equal to PyG's message passing.
    calls = eager_path(monkeypatch, 'compiled')
    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, 5, dtype=torch.double)
    conv = GATEConv(5, 4, heads=heads).double()
    randomize_attention(conv)
    results = []
    for kernel in ('auto', 'reference'):
        conv.zero_grad()
        with attention_kernel(kernel):
            assert selected_kernel(conv, x) == (
                'chunked' if kernel == 'auto' else 'reference'
            )
            out = conv(x, EDGE_INDEX)
        out.square().sum().backward()
        grads = [p.grad.clone() for p in conv.parameters()]
        results.append((out, grads))
    assert calls == ['_forward', '_backward']
    (out, grads), (want, want_grads) = results
    torch.testing.assert_close(out, want, atol=1e-10, rtol=0)
    for a, b in zip(grads, want_grads):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)


def test_eager_backward_with_create_graph_runs_the_chunks(monkeypatch):
    # The compiled backward is not differentiable: with create_graph=True
    # the chunks' backward runs on the compiled forward's saved tensors.
    calls = eager_path(monkeypatch, 'compiled')
    graph = make_graph()
    inputs = make_inputs(graph, 2, 3, 2)
    got = gradients(run(graph, inputs, 0.2), inputs, create_graph=True)
    want = gradients(dense(graph, inputs, 0.2), inputs, create_graph=True)
    assert calls == ['_forward']
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-10, rtol=1e-8)
    got2, want2 = (
        torch.autograd.grad(
            sum(g.square().sum() for g in grads.values()), inputs['q_src']
        )[0]
        for grads in (got, want)
    )
    torch.testing.assert_close(got2, want2, atol=1e-10, rtol=1e-8)


def test_eager_edge_features_past_a_chunk_run_the_chunks(monkeypatch):
    # The compiled loops write the product of the edge features with the
    # edge weight whole: where it is larger than a chunk, eager calls run
    # the chunks (their temporaries stay chunk-sized); without edge
    # features, the compiled loops.
    calls = eager_path(monkeypatch, 'compiled')
    use(monkeypatch, chunk_elements=3 * 2)
    graph = make_graph()  # More edges than a chunk holds on 8 threads.
    assert graph.src.numel() > 8
    for edge_dim, want in ((2, []), (None, ['_forward', '_backward'])):
        calls.clear()
        inputs = make_inputs(graph, 3, 2, edge_dim)
        got = run(graph, inputs, 0.2)
        assert_equal_to(got, dense(graph, inputs, 0.2), inputs)
        assert calls == want


def test_eager_calls_past_a_few_threads_run_the_chunks(monkeypatch):
    # Past SERIAL_MAX_THREADS threads the chunks' ATen operations, which
    # scale with them, run eager calls.
    calls = eager_path(monkeypatch, 'compiled')
    graph = make_graph()
    inputs = make_inputs(graph, 2, 3, None)
    before = torch.get_num_threads()
    torch.set_num_threads(fused.SERIAL_MAX_THREADS + 1)
    try:
        assert_equal_to(run(graph, inputs), dense(graph, inputs, 0), inputs)
    finally:
        torch.set_num_threads(before)
    assert calls == []


def test_eager_calls_without_a_compiler_warn_and_run_the_chunks(monkeypatch):
    import torch._inductor.config as inductor_config

    torch._dynamo.reset()  # Nothing compiled yet, nothing cached:
    monkeypatch.setattr(fused, '_COMPILED', {})
    monkeypatch.setattr(fused, '_compiler_failed', False)
    calls = eager_path(monkeypatch, 'compiled')
    graph = make_graph()
    inputs = make_inputs(graph, 2, 3, None)
    no_compiler = {'fx_graph_cache': False, 'cpp.cxx': ('/no/such/c++',)}
    try:
        with inductor_config.patch(no_compiler):
            with pytest.warns(UserWarning, match='compiling the CPU attent'):
                got = run(graph, inputs)
            assert_equal_to(got, dense(graph, inputs, 0.0), inputs)
            got = run(graph, inputs)
            assert_equal_to(got, dense(graph, inputs, 0.0), inputs)
    finally:
        torch._dynamo.reset()
    assert calls == ['_forward']  # Tried once, never again.


def test_cpu_operator_past_the_fused_size_runs_the_chunks(monkeypatch):
    # Past FUSED_MAX_ELEMENTS the operator runs the chunked ATen loops (in
    # chunks of 5 edges here), equal to the dense computation too.
    use(monkeypatch, loops_max_elements=0)
    use(monkeypatch, chunk_elements=5 * 3 * 2)
    monkeypatch.setattr(fused, '_run', None)  # Never compiled.
    graph = make_graph()
    inputs = make_inputs(graph, 3, 2, 3)
    op = torch.ops.torch_geometric_gate.chunked_attention
    got = op(*op_args(graph, inputs, 0.2))[:2]
    assert_equal_to(got, dense(graph, inputs, 0.2), inputs)


@pytest.mark.parametrize('threads', [2, fused.SERIAL_MAX_THREADS + 1])
def test_cpu_operator_scatters_serially_up_to_a_few_threads(
    monkeypatch, threads
):
    # In parallel, Inductor scatters into node rows with an atomic add per
    # element: up to SERIAL_MAX_THREADS threads the operator's compiled
    # functions run in one thread (no atomic add), past it in parallel;
    # equal to the dense computation either way.
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()  # Compiled afresh, so that the code is seen.
    monkeypatch.setattr(fused, '_COMPILED', {})
    graph = make_graph()
    inputs = make_inputs(graph, 2, 3, None)
    op = torch.ops.torch_geometric_gate.chunked_attention
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got, forward = run_and_get_code(op, *op_args(graph, inputs))
        want = dense(graph, inputs, 0.0)
        # The gradients, compared there, run the compiled backward:
        _, backward = run_and_get_code(assert_equal_to, got[:2], want, inputs)
    finally:
        torch.set_num_threads(before)
    codes = forward + backward
    assert len(codes) == 2
    serial = threads <= fused.SERIAL_MAX_THREADS
    assert all(('atomic_add' in code) != serial for code in codes)


def test_cpu_operator_compiles_in_heads_and_channels_not_graph_sizes(
    monkeypatch,
):
    # The compiled functions have the heads and channels compiled in (a
    # fixed loop over the channels), the edge and node counts dynamic: a
    # graph of another size runs what was compiled.
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()  # Compiled afresh, so that the code is seen.
    monkeypatch.setattr(fused, '_COMPILED', {})
    graph = make_graph()
    inputs = make_inputs(graph, 2, 3, None)
    op = torch.ops.torch_geometric_gate.chunked_attention
    _, codes = run_and_get_code(op, *op_args(graph, inputs))
    assert len(codes) == 1
    # The projections' rows are a size symbol, heads and channels literal:
    assert re.search(r'assert_size_stride\(\w+, \(s\d+, 2, 3\)', codes[0])
    # Twice the graph, two disjoint copies (14 nodes, 46 edges):
    n = graph.num_src
    twice = AttentionGraph(
        torch.cat([graph.src, graph.src + n]),
        torch.cat([graph.dst, graph.dst + n]),
        graph.loop.repeat(2), graph.masked.repeat(2), 2 * n, 2 * n,
        2 * graph.num_loops,
    )  # fmt: skip
    inputs = make_inputs(twice, 2, 3, None)
    with torch.compiler.set_stance('fail_on_recompile'):
        got = op(*op_args(twice, inputs))[:2]
    assert_equal_to(got, dense(twice, inputs, 0.0), inputs)


def code_written(fn, *args):
    r"""Runs :obj:`fn(*args)`; returns its result and the code that Inductor
    wrote meanwhile (none where nothing compiled). Unlike
    :func:`torch._inductor.utils.run_and_get_code` it keeps what Dynamo
    compiled before."""
    from unittest import mock

    from torch._inductor.graph import GraphLowering

    codes = []
    with mock.patch.object(GraphLowering, 'save_output_code', codes.append):
        out = fn(*args)
    return out, codes


def test_cpu_operator_compiles_each_head_shape_on_a_budget_of_its_own(
    monkeypatch,
):
    # Each pair of heads and channels compiles with all of Dynamo's
    # recompilation budget for its settings: with a budget of one
    # compilation, two pairs both compile, each with its own heads and
    # channels compiled in (past the budget Dynamo would run the function
    # uncompiled, and write no code).
    torch._dynamo.reset()
    monkeypatch.setattr(fused, '_COMPILED', {})
    graph = make_graph()
    op = torch.ops.torch_geometric_gate.chunked_attention
    try:
        with torch._dynamo.config.patch(recompile_limit=1):
            for heads, channels in ((2, 3), (3, 2)):
                inputs = make_inputs(graph, heads, channels, None)
                got, codes = code_written(op, *op_args(graph, inputs))
                assert len(codes) == 1, (heads, channels)
                shape = rf'\(s\d+, {heads}, {channels}\)'
                assert re.search(
                    r'assert_size_stride\(\w+, ' + shape, codes[0]
                )
                assert_equal_to(got[:2], dense(graph, inputs, 0.0), inputs)
    finally:
        torch._dynamo.reset()


def saved(fn):
    r"""The distinct storages saved for backward by :obj:`fn()`: their
    bytes by the dtype and shape of the first tensor seen in each."""
    storages: Dict[int, Tuple[int, torch.dtype]] = {}

    def pack(t: Tensor):
        s = t.untyped_storage()
        storages.setdefault(s.data_ptr(), (s.nbytes(), t.dtype))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return list(storages.values())


def lean_bytes(x, weights, att, edge_index, training_dropout):
    # What backward needs: the inputs and the three projections, the edges
    # as int32 (the loop flags are derived from them again), the attention
    # weights (and, with dropout, the softmax before it):
    n, (heads, channels) = x.size(0), att[0].shape[1:]
    num_edges = edge_index.size(1) + n
    nodes = x.numel() + 3 * n * heads * channels + 2 * heads * channels
    nodes = nodes * x.element_size() + 3 * weights[0].numel() * 8
    edges = num_edges * (4 * 2 + heads * x.element_size())
    if training_dropout:
        edges += num_edges * heads * x.element_size()
    return nodes + edges


@pytest.mark.parametrize('dropout', [0.0, 0.5])
def test_chunked_attention_saves_only_narrow_tensors(dropout):
    x, weights, att, edge_index = layer_inputs(heads=2, channels=3)
    fn = layer_attention(None, 0.0, dropout, True)
    storages = saved(lambda: fn(x, weights, *att, edge_index))
    # No int64 edge index, no flags, no [E, H, C] tensor:
    assert all(
        dtype != torch.int64 or nbytes == 8 for nbytes, dtype in storages
    )
    assert all(dtype != torch.bool for _, dtype in storages)
    assert sum(b for b, _ in storages) == lean_bytes(
        x, weights, att, edge_index, dropout > 0
    )


@pytest.mark.slow
@pytest.mark.parametrize('heads', [1, 8])
def test_compiled_chunked_attention_saves_what_eager_saves(heads):
    torch.manual_seed(0)
    num_nodes, num_edges, channels = 300, 6000, 32
    x = torch.randn(num_nodes, 16, requires_grad=True)
    weights = [torch.randn(channels, 16, requires_grad=True) for _ in range(3)]
    att = [
        torch.randn(1, heads, channels // heads, requires_grad=True)
        for _ in range(2)
    ]
    edge_index = torch.randint(num_nodes, (2, num_edges))
    fn = layer_attention(None, 0.0, 0.0, True)
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True)
    compiled(x, weights, *att, edge_index)[1].sum().backward()  # Compiles.
    eager = sum(b for b, _ in saved(lambda: fn(x, weights, *att, edge_index)))
    got = sum(
        b for b, _ in saved(lambda: compiled(x, weights, *att, edge_index))
    )
    assert got <= 1.1 * eager


def test_chunked_attention_rejects_bad_input():
    graph = make_graph()
    inputs = make_inputs(graph, 2, 3, None)
    with pytest.raises(ValueError, match='non-negative slope'):
        run(graph, inputs, slope=-0.1)
    with pytest.raises(ValueError, match=r'dropout probability in \[0, 1\]'):
        run(graph, inputs, dropout=1.5, training=True)
    bad = dict(inputs, value=inputs['value'][..., :2])
    with pytest.raises(ValueError, match=r"'value' of shape \[7, 2, 3\]"):
        run(graph, bad)
    # The rows of the target nodes' projections give the output's:
    bad = dict(inputs, q_dst=inputs['q_dst'][:-1])
    with pytest.raises(ValueError, match=r"'q_dst' of shape \[7, 2, 3\]"):
        run(graph, bad)


# Through the layer ---------------------------------------------------------


def step(conv, x, edge_index, edge_attr=None, seed=0, kernel='auto'):
    torch.manual_seed(seed)
    x = tuple(t.clone().requires_grad_() for t in x)
    with attention_kernel(kernel):
        out, (ei, alpha) = conv(
            x if len(x) == 2 else x[0],
            edge_index,
            edge_attr,
            return_attention_weights=True,
        )
    # A loss that reaches the attention weights directly too:
    loss = (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum()
    loss = loss + (alpha * alpha).sum()
    loss.backward()
    grads = {n: p.grad for n, p in conv.named_parameters()}
    grads.update({f'x{i}': t.grad for i, t in enumerate(x)})
    return out, ei, alpha, grads


@pytest.mark.parametrize(
    'heads,add_self_loops,edge_dim,slope,share_weights,bipartite',
    [
        (1, True, None, 0.0, False, False),
        (3, True, None, 0.0, False, False),
        (3, False, None, 0.0, False, False),
        (2, True, 3, 0.0, False, False),
        (2, False, 3, 0.2, False, False),
        (2, True, None, 0.2, True, False),
        (2, True, None, 0.0, False, True),
    ],
)
def test_chunked_kernels_equal_reference(
    heads, add_self_loops, edge_dim, slope, share_weights, bipartite
):
    torch.manual_seed(0)
    kwargs = dict(
        heads=heads,
        add_self_loops=add_self_loops,
        edge_dim=edge_dim,
        negative_slope=slope,
        share_weights=share_weights,
        residual=True,
    )
    conv = GATEConv(5, 4, **kwargs).double()
    randomize_attention(conv)
    x = (torch.randn(NUM_NODES, 5, dtype=torch.double),)
    edge_index = EDGE_INDEX
    if bipartite:
        x = x + (torch.randn(4, 5, dtype=torch.double),)
        edge_index = EDGE_INDEX[:, EDGE_INDEX[1] < 4]
    edge_attr = None
    if edge_dim is not None:
        edge_attr = torch.randn(edge_index.size(1), 3, dtype=torch.double)

    assert selected_kernel(conv, x[0]) == 'chunked'
    got = step(conv, x, edge_index, edge_attr, seed=7)
    conv.zero_grad()
    expected = step(conv, x, edge_index, edge_attr, 7, 'reference')
    assert torch.allclose(got[0], expected[0], atol=1e-12)
    assert torch.equal(got[1], expected[1])
    assert torch.allclose(got[2], expected[2], atol=1e-12)
    assert got[3].keys() == expected[3].keys()
    for name in got[3]:
        assert torch.allclose(got[3][name], expected[3][name], atol=1e-10), (
            name
        )


@pytest.mark.parametrize('slope', [0.0, 0.2])
def test_chunked_functions_gradcheck_across_chunks(slope):
    # Chunks of 3 edges, so that chunk boundaries are crossed:
    chunk = 3 * 2 * 2
    torch.manual_seed(0)
    kw = dict(dtype=torch.double, requires_grad=True)
    heads, channels, num_edges = 2, 2, 11
    q_src = torch.randn(5, heads, channels, **kw)
    q_dst = torch.randn(4, heads, channels, **kw)
    edge_attr = torch.randn(num_edges, 3, **kw)
    weight = torch.randn(heads * channels, 3, **kw)
    src = torch.randint(0, 4, (num_edges,))
    dst = torch.randint(0, 4, (num_edges,))
    src[:3] = dst[:3]
    loop = src == dst
    att_s = torch.randn(1, heads, channels, **kw)
    att_t = torch.randn(1, heads, channels, **kw)

    def score(q_src, q_dst, edge_attr, weight, att_s, att_t):
        return EdgeScore.apply(
            q_src,
            q_dst,
            edge_attr,
            weight,
            src,
            dst,
            loop,
            att_s,
            att_t,
            slope,
            chunk,
        )

    inputs = (q_src, q_dst, edge_attr, weight, att_s, att_t)
    assert torch.autograd.gradcheck(score, inputs, check_batched_grad=True)
    # The backward is differentiable (gradient penalties):
    assert torch.autograd.gradgradcheck(score, inputs)

    # Against the plain formula:
    z = q_src[src] + q_dst[dst] + (edge_attr @ weight.t()).view(-1, 2, 2)
    z = torch.nn.functional.leaky_relu(z, slope)
    att = torch.where(loop.view(-1, 1, 1), att_t, att_s)
    assert torch.allclose(score(*inputs), (z * att).sum(-1))

    alpha = torch.rand(num_edges, heads, **kw)

    def aggregate(q_src, alpha):
        return EdgeAggregate.apply(q_src, alpha, src, dst, 4, chunk)

    assert torch.autograd.gradcheck(
        aggregate, (q_src, alpha), check_batched_grad=True
    )
    assert torch.autograd.gradgradcheck(aggregate, (q_src, alpha))
    expected = torch.zeros(4, heads, channels, dtype=torch.double)
    expected.index_add_(0, dst, q_src[src] * alpha.unsqueeze(-1))
    assert torch.allclose(aggregate(q_src, alpha), expected)


def random_graph(num_nodes: int = 1000, num_edges: int = 20000):
    torch.manual_seed(0)
    x = torch.randn(num_nodes, 32)
    edge_index = torch.randint(0, num_nodes, (2, num_edges))
    return x, edge_index[:, edge_index[0] != edge_index[1]]


@pytest.mark.parametrize('heads', [1, 8])
def test_chunked_kernels_save_at_most_a_third_of_gatv2(heads):
    num_edges, hidden = 20000, 64
    x, edge_index = random_graph(num_edges=num_edges)
    gate = GATEConv(32, hidden // heads, heads=heads)
    randomize_attention(gate)
    gatv2 = GATv2Conv(32, hidden // heads, heads=heads)

    gate_bytes = saved_bytes(gate, x, edge_index)
    gatv2_bytes = saved_bytes(gatv2, x, edge_index)
    assert gate_bytes <= 0.35 * gatv2_bytes
    # No `[E, H, C]` tensor at all: everything saved is far below it.
    edge_tensor = num_edges * hidden * x.element_size()
    assert gate_bytes < edge_tensor
    # The reference does save them:
    with attention_kernel('reference'):
        assert saved_bytes(gate, x, edge_index) > 2 * edge_tensor


@pytest.mark.parametrize('kernel,chunk', [('chunked', None), ('chunked', 8),
                                           ('reference', None)])  # fmt: skip
def test_one_overflowing_head_leaves_the_others_finite(
    kernel, chunk, monkeypatch
):
    if chunk is not None:  # A few edges per chunk: clean, overflowing ones.
        eager_path(monkeypatch, 'chunks')
        use(monkeypatch, chunk_elements=chunk)
    torch.manual_seed(0)
    # Nodes 0 and 1 positive (U x overflows to +inf), the others negative
    # (-inf, which the ReLU cuts): edges of both kinds.
    x = torch.rand(NUM_NODES, 4) + 0.5
    x[2:] *= -1.0
    conv = GATEConv(4, 3, heads=2)
    randomize_attention(conv)
    with attention_kernel(kernel):
        expected = conv(x, EDGE_INDEX)
        with torch.no_grad():
            conv.lin_src.weight[:3] = 3e38  # head 0 of the score side
        out, (_, alpha) = conv(x, EDGE_INDEX, return_attention_weights=True)
    assert not torch.isfinite(alpha[:, 0]).all()  # head 0 did overflow
    # Head 1 is untouched (it was NaN with a block-diagonal score GEMM):
    assert torch.isfinite(alpha[:, 1]).all()
    assert torch.allclose(out[:, 3:], expected[:, 3:])
    # So are head 1's gradients (a product over all heads' score gradients
    # would carry head 0's NaN into them):
    out[:, 3:].sum().backward()
    for weight in (conv.lin_src.weight, conv.lin_dst.weight):
        assert torch.isfinite(weight.grad[3:]).all()
    for att in (conv.att_neighbor, conv.att_self):
        assert torch.isfinite(att.grad[:, 1]).all()


@pytest.mark.parametrize('kernel', ['chunked', 'reference'])
def test_attention_gradients_stay_finite_at_huge_inputs(kernel):
    for seed, scale in itertools.product(range(10), [1e10, 1e20]):
        torch.manual_seed(seed)
        conv = GATEConv(5, 4, heads=2)
        randomize_attention(conv)
        x = torch.randn(NUM_NODES, 5) * scale
        with attention_kernel(kernel):
            conv(x, EDGE_INDEX).sum().backward()
        for p in (conv.att_neighbor, conv.att_self):
            assert torch.isfinite(p.grad).all(), (seed, scale)


def test_default_path_works_under_torch_func_grad():
    from torch.func import functional_call, grad

    torch.manual_seed(0)
    conv = GATEConv(5, 4, heads=2, edge_dim=2)
    randomize_attention(conv)
    x = torch.randn(NUM_NODES, 5)
    edge_attr = torch.randn(EDGE_INDEX.size(1), 2)
    params = dict(conv.named_parameters())

    def loss(p):
        out = functional_call(conv, p, (x, EDGE_INDEX, edge_attr))
        return out.pow(2).sum()

    got = grad(loss)(params)
    loss(params).backward()
    for name, p in conv.named_parameters():
        assert torch.allclose(got[name], p.grad, atol=1e-5), name


def test_layer_scripts_with_the_custom_ops_registered():
    # `ops.chunked` registers the custom operators on import; TorchScript
    # still compiles the layer (which scripts its reference path):
    assert hasattr(torch.ops.torch_geometric_gate, 'chunked_attention')
    torch.manual_seed(0)
    conv = GATEConv(5, 4, heads=2)
    randomize_attention(conv)
    x = torch.randn(NUM_NODES, 5)
    jit = torch.jit.script(conv)
    assert torch.allclose(jit(x, EDGE_INDEX), conv(x, EDGE_INDEX), atol=1e-6)


@pytest.mark.slow
def test_compiled_memory_benchmark_prints_its_table(capsys):
    from benchmark_testing import load_benchmark

    bench = load_benchmark('compiled_memory')
    torch._dynamo.reset()
    bench.main(['--edges', '20000', '--degree', '20', '--heads', '2'])
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split('|')[1:-1] for line in lines if line[:3] == '| 1']
    assert len(rows) == 1  # One graph, one heads setting.
    edges, nodes, _, heads, *mb = [float(v) for v in rows[0]]
    assert heads == 2 and nodes == 1000 and 19000 < edges <= 20000
    gatv2, gate, c_gatv2, c_gate = mb[:4]
    assert len(mb) == 4 + 3  # Four layers' MB, three ratios.
    # GATE saves far less than GATv2Conv eagerly, and as much compiled:
    assert gate <= 0.35 * gatv2
    assert c_gate <= 1.1 * gate


@pytest.mark.parametrize('path', ['compiled', 'chunks'])
def test_chunked_float16_sums_accumulate_in_float32(monkeypatch, path):
    # Issue 50.3: on CPU a float16 hub's weights summed to 1.09 at
    # in-degree 3,000 (and the outputs drifted): the sums accumulated in
    # float16. Against the float64 reference:
    eager_path(monkeypatch, path)
    torch.manual_seed(0)
    num_nodes = 4000
    conv = GATEConv(4, 4, heads=2)
    randomize_attention(conv)
    src = torch.arange(1, num_nodes)
    edge_index = torch.stack([src, torch.zeros_like(src)])
    x = torch.randn(num_nodes, 4)
    with attention_kernel('chunked'):
        out, (ei, alpha) = conv.half()(
            x.half(), edge_index, return_attention_weights=True
        )
    with attention_kernel('reference'):
        want, (_, want_alpha) = conv.double()(
            x.double(), edge_index, return_attention_weights=True
        )
    hub = ei[1] == 0
    assert torch.allclose(
        alpha[hub].double().sum(0),
        torch.ones(2, dtype=torch.double),
        atol=2e-3,
    )
    assert torch.allclose(out.double(), want, atol=2e-2, rtol=1e-2)
    assert torch.allclose(alpha.double(), want_alpha, atol=5e-4, rtol=2e-2)


@pytest.mark.parametrize('num_nodes,add_self_loops', [(5, False), (0, True)])
def test_eager_compiled_loops_with_edge_features_and_no_edges(
    monkeypatch, num_nodes, add_self_loops
):
    # No edge at all (none given, none appended) with edge features: the
    # compiled backward flattens [0, H, C] gradients; the chunks agree.
    got = {}
    for path in ('compiled', 'chunks'):
        calls = eager_path(monkeypatch, path)
        torch.manual_seed(0)
        conv = GATEConv(5, 4, heads=2, edge_dim=3,
                        add_self_loops=add_self_loops)  # fmt: skip
        x = torch.randn(num_nodes, 5, requires_grad=True)
        edge_attr = torch.randn(0, 3, requires_grad=True)
        empty = torch.empty(2, 0, dtype=torch.long)
        with attention_kernel('chunked'):
            out = conv(x, empty, edge_attr)
        out.sum().backward()
        assert calls == (['_forward', '_backward'] if path == 'compiled'
                         else [])  # fmt: skip
        got[path] = (out, x.grad, edge_attr.grad, conv.lin_edge.weight.grad)
    for a, b in zip(got['compiled'], got['chunks']):
        torch.testing.assert_close(a, b)
    out, x_grad, attr_grad, weight_grad = got['compiled']
    # Without edges each output is the bias; nothing reaches the inputs:
    torch.testing.assert_close(out, conv.bias.expand(num_nodes, -1))
    assert x_grad.abs().sum() == 0 and attr_grad.shape == (0, 3)
    assert weight_grad.abs().sum() == 0


def test_several_heads_options_are_options_of_the_installed_inductor():
    # torch.compile refuses an option its Inductor lacks: torch 2.11 has
    # no `realize_cpu_acc_reads_threshold` (2.13's), only the threshold of
    # every device. The one set is the one Inductor reads for CPU loops.
    import torch._inductor.config as inductor_config

    known = inductor_config.get_config_copy()
    assert set(fused.SEVERAL_HEADS_OPTIONS) <= set(known)
    cpu = 'realize_cpu_acc_reads_threshold'
    want = cpu if cpu in known else 'realize_acc_reads_threshold'
    assert fused.SEVERAL_HEADS_OPTIONS[want] == 32
