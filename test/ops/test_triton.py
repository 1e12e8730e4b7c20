r"""The Triton kernels (:mod:`torch_geometric_gate.ops.triton`) against the
chunked kernels and an independent dense float64 computation.

On CPU they run under the Triton interpreter (``TRITON_INTERPRET=1``, set
here before Triton is imported; tiny graphs only); with CUDA available and
``TRITON_INTERPRET`` unset they run compiled on the GPU.
"""

import importlib.util
import os
import sys

import pytest
import torch

if importlib.util.find_spec('triton') is None:
    pytest.skip('Triton is not installed', allow_module_level=True)
if importlib.util.find_spec('numpy') is None:  # The interpreter needs it.
    pytest.skip('NumPy is not installed', allow_module_level=True)

# test/conftest.py sets TRITON_INTERPRET=1 for the whole run without a GPU,
# before anything (torch_geometric does) imports Triton:
INTERPRET = os.environ.get('TRITON_INTERPRET') == '1'
ON_GPU = torch.cuda.is_available() and not INTERPRET
if not ON_GPU and not INTERPRET:
    os.environ['TRITON_INTERPRET'] = '1'
    # `triton.jit` decides at decoration time (Triton's own `tl.sum` etc.
    # included) whether to interpret, from a setting read once:
    if 'triton.language' in sys.modules:  # torch may import `triton`.
        pytest.skip(
            'Triton was imported before TRITON_INTERPRET=1 was set; run '
            'this module on its own or set TRITON_INTERPRET=1',
            allow_module_level=True,
        )

from torch_geometric_gate.ops import _triton_kernels as kernels  # noqa: E402
from torch_geometric_gate.ops import triton as tops  # noqa: E402
from torch_geometric_gate.ops.chunked import chunked_attention  # noqa: E402
from torch_geometric_gate.ops.types import (  # noqa: E402
    AttentionGraph,
    AttentionParams,
)

DEVICE = torch.device('cuda' if ON_GPU else 'cpu')

ATOL, RTOL = 2e-5, 1e-4


def make_graph(num_nodes=7, num_src=None):
    r"""A small graph: node 0 has a high in-degree, node :obj:`num_nodes -
    1` is isolated, nodes :obj:`0 .. num_nodes - 2` have a self-loop
    (scored with :math:`\mathbf{a}_t`), and node 2 also has a masked input
    self-loop, next to a masked ordinary edge."""
    n = num_nodes - 1
    src = [1, 2, 3, 4, 5, 0, 1, 2, 3, 0, 2, 4, 3, 1, 2]
    dst = [0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 1, 2, 1, 3, 2]
    src = [s % n for s in src] + list(range(n))
    dst = [d % n for d in dst] + list(range(n))
    src = torch.tensor(src, device=DEVICE)
    dst = torch.tensor(dst, device=DEVICE)
    loop = src == dst
    masked = torch.zeros_like(loop)
    masked[14] = True  # The input self-loop (2, 2).
    masked[3] = True  # An ordinary edge (4, 0).
    return src, dst, loop, masked, num_nodes


def make_inputs(num_src, num_dst, num_edges, heads, channels, edge_dim,
                dtype=torch.float32, att_dtype=None, seed=0):  # fmt: skip
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape, dt=dtype):
        t = torch.randn(*shape, generator=gen, dtype=torch.float64)
        return t.to(DEVICE, dt).requires_grad_()

    att_dtype = att_dtype or dtype
    inputs = {
        'q_src': rand(num_src, heads, channels),
        'q_dst': rand(num_dst, heads, channels),
        'value': rand(num_src, heads, channels),
        'edge_attr': rand(num_edges, edge_dim) if edge_dim else None,
        'weight_edge': (
            rand(heads * channels, edge_dim) if edge_dim else None
        ),
        'att_neighbor': rand(1, heads, channels, dt=att_dtype),
        'att_self': rand(1, heads, channels, dt=att_dtype),
    }
    return inputs


NAMES = ('q_src', 'q_dst', 'value', 'edge_attr', 'weight_edge',
         'att_neighbor', 'att_self')  # fmt: skip


def triton_run(graph, inputs, slope=0.0, dropout=0.0, training=False,
               need_weights=True, edge_index=None, num_loops=0):  # fmt: skip
    r""":func:`triton_attention` on the graph tuple :obj:`(src, dst, loop,
    masked, num_dst)` of these tests."""
    src, dst, loop, masked, num_dst = graph
    i = inputs
    attention_graph = AttentionGraph(
        src, dst, loop, masked, i['q_src'].size(0), num_dst, num_loops,
        edge_index,
    )  # fmt: skip
    params = AttentionParams(
        i['att_neighbor'], i['att_self'], i['weight_edge'], slope, dropout,
        training, need_weights,
    )  # fmt: skip
    return tops.triton_attention(
        attention_graph, params, i['q_src'], i['q_dst'], i['value'],
        i['edge_attr'],
    )  # fmt: skip


def run(fn, graph, inputs, slope=0.0, dropout=0.0, training=False):
    if fn is tops.triton_attention:
        return triton_run(graph, inputs, slope, dropout, training)
    src, dst, loop, masked, num_dst = graph
    i = inputs
    return fn(
        src, dst, i['q_src'], i['q_dst'], i['value'], i['edge_attr'],
        i['weight_edge'], loop, masked, i['att_neighbor'], i['att_self'],
        slope, dropout, training, num_dst,
    )  # fmt: skip


def dense_attention(src, dst, loop, masked, num_dst, inputs, slope,
                    keep=None, p=0.0):  # fmt: skip
    r"""GATE's attention in float64 with a dense :obj:`[N, E]` incidence
    matrix (no scatter, no PyG softmax)."""
    i = {k: (v.double() if v is not None else None) for k, v in inputs.items()}
    heads, channels = i['value'].shape[1:]
    z = i['q_src'][src] + i['q_dst'][dst]
    if i['edge_attr'] is not None:
        z = z + (i['edge_attr'] @ i['weight_edge'].t()).view_as(z)
    act = torch.where(z > 0, z, slope * z)
    att = torch.where(loop.view(-1, 1, 1), i['att_self'], i['att_neighbor'])
    score = (act * att).sum(-1)  # [E, H]
    valid = torch.ones_like(loop) if masked is None else ~masked
    nodes = torch.arange(num_dst, device=src.device)
    member = (dst[None, :] == nodes[:, None]) & valid[None, :]  # [N, E]
    scores = torch.where(member[..., None], score[None], float('-inf'))
    top = scores.amax(1, keepdim=True).detach()
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    weight = torch.where(
        member[..., None], (scores - top).exp(), torch.zeros_like(scores)
    )
    total = weight.sum(1, keepdim=True)
    alpha = (weight / torch.where(total > 0, total, 1.0)).sum(0)  # [E, H]
    if keep is not None:
        alpha = alpha * keep.double() / (1 - p)
    incidence = (dst[None, :] == nodes[:, None]).double()
    out = torch.einsum(
        'ne,ehc->nhc', incidence, alpha[..., None] * i['value'][src]
    )
    return alpha, out


def grads(outputs, inputs, grad_alpha, grad_out):
    wanted = [inputs[k] for k in NAMES if inputs[k] is not None]
    got = iter(torch.autograd.grad(outputs, wanted, (grad_alpha, grad_out)))
    return {k: next(got) for k in NAMES if inputs[k] is not None}


def assert_close(actual, expected, atol=ATOL, rtol=RTOL, what=''):
    torch.testing.assert_close(
        actual.double(), expected.double(), atol=atol, rtol=rtol, msg=what
    )


def check_against(fn_ref, graph, inputs, slope, atol=ATOL, rtol=RTOL,
                  dense=True):  # fmt: skip
    alpha, out = run(tops.triton_attention, graph, inputs, slope)
    gen = torch.Generator().manual_seed(1)
    grad_alpha = torch.randn(alpha.shape, generator=gen).to(DEVICE)
    grad_out = torch.randn(out.shape, generator=gen).to(DEVICE)
    got = grads((alpha, out), inputs, grad_alpha, grad_out)
    src, dst, loop, masked, num_dst = graph
    if dense:
        d_alpha, d_out = dense_attention(
            src, dst, loop, masked, num_dst, inputs, slope
        )
        assert_close(alpha, d_alpha, atol, rtol, 'alpha vs dense')
        assert_close(out, d_out, atol, rtol, 'out vs dense')
        want = grads(
            (d_alpha, d_out), inputs, grad_alpha.double(), grad_out.double()
        )
        for k in want:
            assert_close(got[k], want[k], atol, rtol, f'grad {k} vs dense')
    if fn_ref is not None:
        r_alpha, r_out = run(fn_ref, graph, inputs, slope)
        assert r_alpha.dtype == alpha.dtype and r_out.dtype == out.dtype
        assert_close(alpha, r_alpha, atol, rtol, 'alpha vs chunked')
        assert_close(out, r_out, atol, rtol, 'out vs chunked')
        want = grads((r_alpha, r_out), inputs, grad_alpha, grad_out)
        for k in want:
            assert want[k].dtype == got[k].dtype, k
            assert_close(got[k], want[k], atol, rtol, f'grad {k} vs chunked')
    return alpha, out, got


@pytest.mark.parametrize(
    'heads,channels,edge_dim,slope',
    [(1, 4, None, 0.0), (3, 5, 2, 0.0), (3, 3, None, 0.2), (1, 6, 3, 0.2)],
)
def test_triton_matches_dense_and_chunked(heads, channels, edge_dim, slope):
    graph = make_graph()
    src, dst, loop, masked, num = graph
    inputs = make_inputs(num, num, src.numel(), heads, channels, edge_dim)
    alpha, out, got = check_against(chunked_attention, graph, inputs, slope)
    # The isolated node: no output, no gradient; masked edges: alpha 0.
    assert bool((out[num - 1] == 0).all())
    assert bool((got['q_dst'][num - 1] == 0).all())
    assert bool((got['value'][num - 1] == 0).all())
    assert bool((alpha[masked] == 0).all())


def test_triton_bipartite_without_loops():
    src = torch.tensor([0, 1, 2, 3, 4, 0, 4, 2], device=DEVICE)
    dst = torch.tensor([0, 0, 1, 1, 2, 2, 2, 0], device=DEVICE)
    loop = torch.zeros_like(src, dtype=torch.bool)
    graph = (src, dst, loop, None, 4)  # Target 3 has no edges.
    inputs = make_inputs(5, 4, src.numel(), 2, 3, 2)
    check_against(chunked_attention, graph, inputs, 0.0)


def test_triton_all_edges_masked_gives_zero():
    src = torch.tensor([0, 1, 1, 2], device=DEVICE)
    dst = torch.tensor([1, 1, 0, 0], device=DEVICE)
    loop = src == dst
    masked = torch.tensor([True, True, False, False], device=DEVICE)
    graph = (src, dst, loop, masked, 3)
    inputs = make_inputs(3, 3, 4, 2, 3, None)
    alpha, out, _ = check_against(None, graph, inputs, 0.0)
    assert bool((out[1] == 0).all()) and bool((alpha[:2] == 0).all())


def _star(degree):
    # Node 0 receives `degree` edges (its self-loop included), plus a few
    # other edges.
    n = degree
    src = list(range(n)) + [0, 0, 1]
    dst = [0] * n + [1, 2, 2]
    src = torch.tensor(src, device=DEVICE)
    dst = torch.tensor(dst, device=DEVICE)
    return src, dst, src == dst, None, n


@pytest.mark.parametrize('block', [2, None])
def test_triton_degree_above_block_size(block, monkeypatch):
    monkeypatch.setattr(tops, 'BLOCK_EDGES', block)
    degree = 11 if block else 150  # The default block: 64 edges here.
    graph = _star(degree)
    n = graph[-1]
    inputs = make_inputs(n, n, graph[0].numel(), 1, 4, 2 if block else None)
    check_against(chunked_attention, graph, inputs, 0.0)


def test_triton_dropout_seeded_and_consistent():
    graph = make_graph()
    src, dst, loop, masked, num = graph
    inputs = make_inputs(num, num, src.numel(), 3, 5, 2)
    p = 0.4
    plain, _ = run(tops.triton_attention, graph, inputs)
    torch.manual_seed(7)
    alpha, out = run(tops.triton_attention, graph, inputs, 0.0, p, True)
    torch.manual_seed(7)
    alpha2, out2 = run(tops.triton_attention, graph, inputs, 0.0, p, True)
    assert torch.equal(alpha, alpha2) and torch.equal(out, out2)
    torch.manual_seed(8)
    alpha3, _ = run(tops.triton_attention, graph, inputs, 0.0, p, True)
    assert not torch.equal(alpha, alpha3)
    # Evaluation mode (or p = 0) does not drop:
    evaluated, _ = run(tops.triton_attention, graph, inputs, 0.0, p, False)
    assert torch.equal(evaluated, plain)

    keep = alpha != 0
    dropped = (~keep)[~masked]
    assert 0 < int(dropped.sum()) < dropped.numel()
    # The kept weights are scaled by 1 / (1 - p), as F.dropout does:
    assert_close(alpha, plain * keep / (1 - p), what='scaled weights')
    # Against the dense computation with the same mask, gradients included:
    gen = torch.Generator().manual_seed(2)
    grad_alpha = torch.randn(alpha.shape, generator=gen).to(DEVICE)
    grad_out = torch.randn(out.shape, generator=gen).to(DEVICE)
    got = grads((alpha, out), inputs, grad_alpha, grad_out)
    d_alpha, d_out = dense_attention(
        src, dst, loop, masked, num, inputs, 0.0, keep=keep, p=p
    )
    assert_close(alpha, d_alpha, what='alpha')
    assert_close(out, d_out, what='out')
    want = grads((d_alpha, d_out), inputs, grad_alpha.double(),
                 grad_out.double())  # fmt: skip
    for k in want:
        assert_close(got[k], want[k], what=f'grad {k}')


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
@pytest.mark.parametrize('att_dtype', [None, torch.float32])
def test_triton_low_precision_inputs(dtype, att_dtype):
    graph = make_graph()
    src, dst, loop, masked, num = graph
    inputs = make_inputs(num, num, src.numel(), 3, 5, 2, dtype, att_dtype)
    alpha, out, got = check_against(
        chunked_attention, graph, inputs, 0.0, atol=5e-2, rtol=5e-2
    )
    for k, g in got.items():
        assert g.dtype == inputs[k].dtype, k


def test_triton_double_backward_matches_chunked():
    graph = make_graph()
    src, dst, loop, masked, num = graph
    inputs = make_inputs(num, num, src.numel(), 2, 3, 2)
    wanted = [inputs[k] for k in NAMES]

    def penalty(fn):
        alpha, out = run(fn, graph, inputs, 0.1)
        loss = (out.square().sum() + alpha.square().sum()) / 2
        first = torch.autograd.grad(loss, wanted, create_graph=True)
        total = sum(g.square().sum() for g in first)
        return first, torch.autograd.grad(total, wanted)

    got_first, got = penalty(tops.triton_attention)
    want_first, want = penalty(chunked_attention)
    for name, a, b in zip(NAMES, got_first + got, want_first + want):
        assert_close(a, b, what=name)


def test_triton_double_backward_keeps_the_dropout_mask():
    graph = make_graph()
    src, dst, loop, masked, num = graph
    inputs = make_inputs(num, num, src.numel(), 2, 3, None)
    wanted = [inputs[k] for k in NAMES if inputs[k] is not None]
    firsts = []
    for create_graph in (False, True):
        torch.manual_seed(3)
        alpha, out = run(tops.triton_attention, graph, inputs, 0.0, 0.5, True)
        firsts.append(
            torch.autograd.grad(
                out.sum() + alpha.sum(), wanted, create_graph=create_graph
            )
        )
    for a, b in zip(*firsts):
        assert_close(a, b, what='first-order gradients')


@pytest.mark.skipif(
    not INTERPRET, reason='on a GPU the kernels compile when they run'
)
def test_triton_kernels_compile_for_gpu_targets(tmp_path):
    # The interpreter accepts code that a GPU compiler may reject: every
    # kernel, as these configurations launch it (dtypes, heads, edge
    # features, dropout, double backward), compiles to a cubin for sm_90
    # (H100, H200) and sm_80 (A100) with Triton's compiler and the ptxas
    # it ships (benchmark/triton_compile.py); no GPU needed.
    import json
    import subprocess

    from benchmark_testing import load_benchmark

    from torch_geometric_gate.ops import _triton_kernels

    tc = load_benchmark('triton_compile')
    if not tc.has_ptxas():
        pytest.skip('this Triton ships no ptxas (the wheels for x86 Linux do)')
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    script = os.path.join(root, 'benchmark', 'triton_compile.py')

    runs = {name: getattr(_triton_kernels, name).run for name in tc.KERNELS}
    launches = tc.record_launches(
        [
            (1, 4, 'float32', None, 0.0),
            (3, 5, 'float32', 2, 0.3),
            (3, 5, 'bfloat16', 2, 0.0),
            (2, 8, 'float16', None, 0.3),
        ],
        double_backward=True,
    )
    assert {r['kernel'] for r in launches} == set(tc.KERNELS)
    assert {r['constants']['HAS_EDGE'] for r in launches
            if r['kernel'] == 'gate_fwd_kernel'} == {True, False}  # fmt: skip
    # The recording is undone:
    assert all(
        getattr(_triton_kernels, n).run == run for n, run in runs.items()
    )

    path = tmp_path / 'launches.json'
    path.write_text(json.dumps(launches))
    env = {k: v for k, v in os.environ.items() if k != 'TRITON_INTERPRET'}
    env['PYTHONPATH'] = root + os.pathsep + env.get('PYTHONPATH', '')
    env['TRITON_CACHE_DIR'] = str(tmp_path / 'cache')  # compile afresh
    done = subprocess.run(
        [sys.executable, script, '--launches', str(path), '--arch', '90',
         '80'],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert f'compiled {len(launches)} launches for 2 targets' in done.stdout
