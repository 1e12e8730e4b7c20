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
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

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

from conv_testing import saved_bytes  # noqa: E402

from torch_geometric_gate.ops import (  # noqa: E402
    AttentionInputs,
    current_settings,
)
from torch_geometric_gate.ops.chunked import chunked_attention  # noqa: E402
from torch_geometric_gate.ops.triton import _kernels as kernels  # noqa: E402
from torch_geometric_gate.ops.triton import _launch as launch  # noqa: E402
from torch_geometric_gate.ops.triton import op as tops  # noqa: E402
from torch_geometric_gate.ops.triton._csr import forward_csr  # noqa: E402
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


def bundle(graph, inputs, slope=0.0, dropout=0.0, training=False,
           need_weights=True, edge_index=None, num_loops=0):  # fmt: skip
    r"""The :class:`AttentionGraph` and :class:`AttentionParams` of the
    graph tuple :obj:`(src, dst, loop, masked, num_dst)` of these tests."""
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
    return attention_graph, params


def triton_run(graph, inputs, *args, **kwargs):
    r""":func:`triton_attention` on the graph tuple of these tests (the
    other arguments: :func:`bundle`'s), as :obj:`(alpha, out)`."""
    return run_bundled(tops.triton_attention, graph, inputs, *args, **kwargs)


def run_bundled(fn, graph, inputs, *args, **kwargs):
    i = inputs
    projections = AttentionInputs(
        i['q_src'], i['q_dst'], i['value'], i['edge_attr']
    )
    out, alpha = fn(
        *bundle(graph, inputs, *args, **kwargs), projections,
        current_settings(),
    )  # fmt: skip
    return alpha, out


def run(fn, graph, inputs, slope=0.0, dropout=0.0, training=False):
    return run_bundled(fn, graph, inputs, slope, dropout, training)


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
    monkeypatch.setattr(launch, 'BLOCK_EDGES', block)
    degree = 11 if block else 150  # The default block: 4 edges here.
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


def _edge_index_graph(edge_index, num_nodes):
    r"""The graph tuple of an input :obj:`[2, E0]` edge index with the
    self-loops :obj:`(i, i)` of every node appended, as the layer builds
    it; the input's own self-loops are masked."""
    ei = (
        edge_index.as_tensor()
        if hasattr(edge_index, 'as_tensor')
        else (edge_index)
    )
    nodes = torch.arange(num_nodes, device=DEVICE)
    src = torch.cat([ei[0], nodes])
    dst = torch.cat([ei[1], nodes])
    loop = src == dst
    masked = loop.clone()
    masked[ei.size(1) :] = False
    return src, dst, loop, masked, num_nodes


def _input_edges(num_nodes=7):
    src, dst, _, _, _ = make_graph(num_nodes)
    keep = torch.arange(src.numel(), device=DEVICE) < 15  # the input edges
    return torch.stack([src[keep], dst[keep]])


@pytest.mark.parametrize('sort', ['col', 'row', None])
def test_triton_edge_index_matches_plain_tensor(sort):
    from torch_geometric import EdgeIndex

    num = 7
    plain = _input_edges(num)
    ei = EdgeIndex(plain, sparse_size=(num, num))
    if sort is not None:
        ei = ei.sort_by(sort)[0]
    graph = _edge_index_graph(ei, num)
    inputs = make_inputs(num, num, graph[0].numel(), 2, 3, 2)
    alpha, out = triton_run(graph, inputs, 0.1, edge_index=ei, num_loops=num)
    want_alpha, want_out = triton_run(graph, inputs, 0.1, num_loops=num)
    assert_close(alpha, want_alpha, what='alpha vs plain')
    assert_close(out, want_out, what='out vs plain')
    gen = torch.Generator().manual_seed(1)
    g_alpha = torch.randn(alpha.shape, generator=gen).to(DEVICE)
    g_out = torch.randn(out.shape, generator=gen).to(DEVICE)
    got = grads((alpha, out), inputs, g_alpha, g_out)
    want = grads((want_alpha, want_out), inputs, g_alpha, g_out)
    for k in want:
        assert_close(got[k], want[k], what=f'grad {k} vs plain')
    check_against(chunked_attention, graph, inputs, 0.1)


def test_triton_edge_index_csr_built_once_across_calls_and_layers(
    monkeypatch,
):
    # PyG caches the CSC (and the CSR the backward reads) on the EdgeIndex:
    # built once for every call and every layer on it; nothing is sorted
    # per call.
    import torch_geometric.edge_index as pyg_edge_index
    from torch_geometric import EdgeIndex

    num = 7
    ei = EdgeIndex(_input_edges(num), sparse_size=(num, num))
    ei = ei.sort_by('col')[0]
    graph = _edge_index_graph(ei, num)
    counts = {'index2ptr': 0, 'index_sort': 0, 'argsort': 0}

    def counting(name, fn):
        def wrapped(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)

        return wrapped

    import torch_geometric.utils as pyg_utils

    monkeypatch.setattr(
        pyg_edge_index, 'index2ptr',
        counting('index2ptr', pyg_edge_index.index2ptr),
    )  # fmt: skip
    monkeypatch.setattr(
        pyg_utils, 'index_sort', counting('index_sort', pyg_utils.index_sort)
    )
    monkeypatch.setattr(torch, 'argsort', counting('argsort', torch.argsort))
    layers = [make_inputs(num, num, graph[0].numel(), h, 3, None, seed=h)
              for h in (1, 2)]  # fmt: skip
    for _ in range(2):
        for inputs in layers:
            alpha, out = triton_run(
                graph, inputs, edge_index=ei, num_loops=num
            )
            (out.sum() + alpha.sum()).backward()
    # The CSC's pointer, then the CSR's (a sort by row and its pointer):
    assert counts == {'index2ptr': 2, 'index_sort': 1, 'argsort': 0}
    assert ei._indptr is not None and ei._T_indptr is not None
    # Plain tensors: one sort per step (the forward's, of the targets and
    # the sources at once; the backward reuses it):
    counts['sort'] = 0
    sort = torch.sort
    monkeypatch.setattr(torch, 'sort', counting('sort', sort))
    alpha, out = triton_run(graph, layers[0], num_loops=num)
    (out.sum() + alpha.sum()).backward()
    assert counts['sort'] == 1 and counts['argsort'] == 0
    # Without a backward to follow, the forward sorts the targets alone
    # (no reverse CSR):
    sizes = []
    monkeypatch.setattr(
        torch, 'sort', lambda t, **kw: sizes.append(t.numel()) or sort(t, **kw)
    )
    with torch.no_grad():
        triton_run(graph, layers[0], num_loops=num)
    assert sizes == [graph[0].numel()]


@pytest.mark.parametrize('sort', [None, 'col'])
def test_triton_two_edge_indices_of_one_shape(sort):
    # Issue 35, item 2: every EdgeIndex reports data_ptr() == 0; two graphs
    # of one shape once shared a cached CSR.
    from torch_geometric import EdgeIndex

    a = EdgeIndex([[0, 1, 2], [1, 2, 3]], sparse_size=(4, 4), device=DEVICE)
    b = EdgeIndex([[3, 3, 3], [0, 0, 0]], sparse_size=(4, 4), device=DEVICE)
    if sort is not None:
        a, b = a.sort_by(sort)[0], b.sort_by(sort)[0]
    for ei in (a, b, a, b):
        graph = _edge_index_graph(ei, 4)
        inputs = make_inputs(4, 4, graph[0].numel(), 2, 3, None)
        _, out = triton_run(graph, inputs, edge_index=ei, num_loops=4)
        _, want = run(chunked_attention, graph, inputs)
        assert_close(out, want, what='out vs chunked')


@pytest.mark.parametrize(
    'num_src,num_dst,num_edges,strided',
    [(7, 5, 40, False), (5, 9, 33, True), (4, 4, 0, False), (1, 3, 2, False),
     (300, 200, 2500, False)],
)  # fmt: skip
def test_triton_csr_and_reverse_from_one_sort(
    num_src, num_dst, num_edges, strided
):
    # The two CSR kernels finish the sort's CSR and reverse CSR: the same
    # as stable argsorts of the targets and of the sources, the row
    # pointers as bincounts (bipartite sizes, no edges, strided sources,
    # empty rows, several programs of the kernels' 1,024 positions).
    from torch_geometric_gate.ops.triton._csr import csr_and_reverse

    gen = torch.Generator().manual_seed(num_edges)
    src = torch.randint(num_src, (num_edges,), generator=gen)
    dst = torch.randint(num_dst, (num_edges,), generator=gen)
    ei = torch.stack([src, dst]).to(DEVICE)
    if strided:  # rows of an [E, 2] tensor's transpose: stride 2
        ei = ei.t().contiguous().t()
        assert ei[0].stride(0) == 2
    graph = AttentionGraph(
        ei[0], ei[1], None, None, num_src=num_src, num_dst=num_dst, num_loops=0
    )
    csr, (rev_rowptr, rev_pos) = csr_and_reverse(graph)
    perm = torch.sort(dst, stable=True).indices
    for got in (csr.perm, csr.src, csr.rowptr, csr.dst, rev_rowptr, rev_pos):
        assert got.dtype == torch.int32 and got.is_contiguous()
    assert torch.equal(csr.perm.cpu().long(), perm)
    assert torch.equal(csr.src.cpu().long(), src[perm])
    assert torch.equal(csr.dst.cpu().long(), dst[perm])
    count = torch.bincount(dst, minlength=num_dst).cumsum(0)
    assert torch.equal(
        csr.rowptr.cpu().long(), torch.cat([count.new_zeros(1), count])
    )
    count = torch.bincount(src, minlength=num_src).cumsum(0)
    assert torch.equal(
        rev_rowptr.cpu().long(), torch.cat([count.new_zeros(1), count])
    )
    # The CSR position of every edge, in the order of the sources:
    pos_of = torch.empty_like(perm)
    pos_of[perm] = torch.arange(num_edges)
    rev = torch.sort(src, stable=True).indices
    assert torch.equal(rev_pos.cpu().long(), pos_of[rev])


@pytest.mark.parametrize('reverse', [False, True])
def test_triton_csr_refuses_sizes_past_int32(reverse):
    # Node counts the kernels' int32 indices cannot reach are refused
    # before anything is allocated (for either CSR build).
    from torch_geometric_gate.ops.triton._csr import (
        csr_and_reverse,
        forward_csr,
    )

    ei = torch.tensor([[0, 1], [1, 0]], device=DEVICE)
    graph = AttentionGraph(
        ei[0], ei[1], None, None, num_src=2, num_dst=2**31, num_loops=0
    )
    build = csr_and_reverse if reverse else forward_csr
    with pytest.raises(RuntimeError, match='index with int32: expected'):
        build(graph)


@pytest.mark.parametrize('mask_input_loops', [True, False])
def test_triton_csr_kernel_derives_the_edge_kinds(mask_input_loops):
    # Where the graph has no flags, the CSR kernel writes the kind of every
    # CSR position: a self-loop is scored with a_t, and masked if it is the
    # input's own (the last num_loops edges are the appended ones).
    from torch_geometric_gate.ops.triton._csr import (
        csr_and_reverse,
        edge_kinds,
    )

    n, num_input = 6, 30
    gen = torch.Generator().manual_seed(5)
    src = torch.randint(n, (num_input,), generator=gen)
    dst = torch.randint(n, (num_input,), generator=gen)
    src[:4] = dst[:4]  # The input's own self-loops.
    src = torch.cat([src, torch.arange(n)])
    dst = torch.cat([dst, torch.arange(n)])
    graph = AttentionGraph(
        src.to(DEVICE), dst.to(DEVICE), None, None, num_src=n, num_dst=n,
        num_loops=n, mask_input_loops=mask_input_loops,
    )  # fmt: skip
    csr, _ = csr_and_reverse(graph)
    e = csr.perm.cpu().long()
    loop = src[e] == dst[e]
    masked = loop & (e < num_input) & mask_input_loops
    want = loop.long() + 2 * masked.long()
    assert torch.equal(csr.kind.cpu().long(), want)
    assert edge_kinds(graph, csr) is csr.kind
    # Flags given: the kinds come from the flags, none derived.
    flags = torch.zeros_like(graph.src, dtype=torch.bool)
    flagged = graph._replace(loop=flags, masked=flags, mask_input_loops=False)
    csr, _ = csr_and_reverse(flagged)
    assert csr.kind is None
    assert not edge_kinds(flagged, csr).any()


@pytest.mark.parametrize('sort', ['col', 'row'])
@pytest.mark.parametrize('num_src,num_dst', [(6, 6), (4, 7), (7, 4)])
def test_triton_edge_index_csr_merges_the_loops_in(sort, num_src, num_dst):
    # From a sorted EdgeIndex's cached CSC and CSR, the appended self-loops
    # merged in by gate_merge_csr_kernel and gate_merge_rev_kernel: the CSR
    # and the reverse CSR of a stable sort of all edges, loops included
    # (each loop last among its node's edges), in int32; with every CSR
    # position's target and kind.
    from torch_geometric import EdgeIndex

    from torch_geometric_gate.ops.triton._csr import csr_and_reverse

    gen = torch.Generator().manual_seed(num_src * 10 + num_dst)
    ei = torch.stack([
        torch.randint(num_src, (30,), generator=gen),
        torch.randint(num_dst, (30,), generator=gen),
    ])  # fmt: skip
    ei[0, :3] = ei[1, :3] % num_src  # Input self-loops (masked).
    ei = EdgeIndex(ei, sparse_size=(num_src, num_dst)).sort_by(sort)[0]
    ei = ei.to(DEVICE)
    num_loops = min(num_src, num_dst)
    loops = torch.arange(num_loops, device=DEVICE)
    src = torch.cat([ei.as_tensor()[0], loops])
    dst = torch.cat([ei.as_tensor()[1], loops])
    graph = AttentionGraph(
        src, dst, None, None, num_src=num_src, num_dst=num_dst,
        num_loops=num_loops, edge_index=ei, mask_input_loops=True,
    )  # fmt: skip
    csr, (rev_rowptr, rev_pos) = csr_and_reverse(graph)
    for got in (csr.perm, csr.src, csr.dst, csr.rowptr, csr.kind,
                rev_rowptr, rev_pos):  # fmt: skip
        assert got.dtype == torch.int32
    src, dst = src.cpu(), dst.cpu()
    perm, pos_of = csr.perm.cpu().long(), torch.empty(src.numel()).long()
    pos_of[perm] = torch.arange(perm.numel())
    assert torch.equal(csr.src.cpu().long(), src[perm])
    assert torch.equal(csr.dst.cpu().long(), dst[perm])
    num_input = src.numel() - num_loops
    loop = src[perm] == dst[perm]
    masked = loop & (perm < num_input)
    assert masked.any()
    assert torch.equal(csr.kind.cpu().long(), loop.long() + 2 * masked.long())

    def check_rows(ptr, values, node, edge_of):
        # Every node's edges (in the EdgeIndex's order), its loop last:
        ptr = ptr.cpu().long()
        assert ptr[0] == 0 and ptr[-1] == values.numel()
        for v in range(ptr.numel() - 1):
            row = values[ptr[v] : ptr[v + 1]]
            assert torch.equal(row.sort().values,
                               edge_of[node == v].sort().values)  # fmt: skip
            if v < num_loops:
                assert row[-1] == edge_of[num_input + v]

    check_rows(csr.rowptr, perm, dst, torch.arange(src.numel()))
    check_rows(rev_rowptr, rev_pos.cpu().long(), src, pos_of)


@pytest.mark.parametrize(
    'how',
    [
        pytest.param(
            'numpy',
            marks=pytest.mark.skipif(
                ON_GPU, reason='NumPy views host memory only'
            ),
        ),
        'data',
        'dlpack',
    ],
)
def test_triton_sees_writes_that_keep_the_version(how):
    # Issue 35, item 3: writes that do not bump the version counter once
    # left a stale cached CSR; the CSR is built at every call now.
    num = 7
    edge_index = _input_edges(num).clone()
    inputs = make_inputs(num, num, edge_index.size(1) + num, 1, 4, None)

    def both():
        graph = _edge_index_graph(edge_index, num)
        _, out = triton_run(graph, inputs, num_loops=num)
        return out, run(chunked_attention, graph, inputs)[1]

    got, want = both()
    assert_close(got, want)
    version = edge_index._version
    if how == 'numpy':
        edge_index.numpy()[1, 0] = 4
    elif how == 'data':
        edge_index.data[1, 0] = 4
    else:
        torch.from_dlpack(edge_index.__dlpack__())[1, 0] = 4
    assert edge_index._version == version and int(edge_index[1, 0]) == 4
    got2, want2 = both()
    assert not torch.allclose(want, want2)
    assert_close(got2, want2, what='after the write')


def test_triton_concurrent_threads():
    # Issue 35, item 25: no shared state between calls. The interpreter's
    # program ids are process-global, so the launches take turns here (on
    # a GPU they need not); the ATen parts of the CSR builds and autograd
    # run concurrently.
    import threading
    from concurrent.futures import ThreadPoolExecutor

    lock = threading.Lock()
    names = kernels.__all__  # the CSR's kernels too
    saved = {n: getattr(kernels, n).run for n in names}

    def serial(run_kernel):
        def run_it(*args, **kwargs):
            with lock:
                return run_kernel(*args, **kwargs)

        return run_it

    def job(seed):
        graph = _star(5 + seed % 4)
        n = graph[-1]
        inputs = make_inputs(n, n, graph[0].numel(), 2, 3, None, seed=seed)
        alpha, out = triton_run(graph, inputs)
        got = grads((alpha, out), inputs, torch.ones_like(alpha),
                    torch.ones_like(out))  # fmt: skip
        r_alpha, r_out = run(chunked_attention, graph, inputs)
        want = grads((r_alpha, r_out), inputs, torch.ones_like(alpha),
                     torch.ones_like(out))  # fmt: skip
        assert_close(out, r_out)
        assert_close(alpha, r_alpha)
        for k in want:
            assert_close(got[k], want[k], what=k)
        return seed

    try:
        for n in names:
            getattr(kernels, n).run = serial(saved[n])
        with ThreadPoolExecutor(8) as pool:
            assert sorted(pool.map(job, range(8))) == list(range(8))
    finally:
        for n in names:
            getattr(kernels, n).run = saved[n]


def _triton_inputs(edge_dim=2, dtype=torch.float32):
    graph = make_graph()
    num = graph[-1]
    return graph, make_inputs(num, num, graph[0].numel(), 2, 3, edge_dim,
                              dtype)  # fmt: skip


@pytest.mark.parametrize('dtype', [torch.int64, torch.float64, torch.float16])
def test_triton_refuses_edge_attr_of_another_dtype(dtype):
    # Issue 35, items 4 and 22: the reference and chunked kernels raise
    # (they multiply edge_attr by the float32 weight); Triton once cast.
    graph, inputs = _triton_inputs()
    inputs['edge_attr'] = inputs['edge_attr'].detach().to(dtype)
    with pytest.raises(RuntimeError, match='same dtype') as info:
        triton_run(graph, inputs)
    assert str(dtype) in str(info.value) and 'edge_attr' in str(info.value)
    with pytest.raises(RuntimeError, match='same dtype'):
        run(chunked_attention, graph, inputs)


def test_triton_refuses_float64():
    # Issue 35, item 11: float64 was computed in float32 and returned as
    # float64; the chunked kernels and the reference compute in float64.
    graph, inputs = _triton_inputs(None, torch.float64)
    with pytest.raises(TypeError, match=r"'q_src' of dtype torch.float64"):
        triton_run(graph, inputs)


def test_triton_weights_kernel_only_when_asked(monkeypatch):
    graph, inputs = _triton_inputs()
    calls = []
    run_alpha = kernels.gate_alpha_kernel.run

    def spy(*args, **kwargs):
        calls.append(1)
        return run_alpha(*args, **kwargs)

    monkeypatch.setattr(kernels.gate_alpha_kernel, 'run', spy)
    alpha, out = triton_run(graph, inputs, need_weights=False)
    assert alpha is None and not calls
    _, want = triton_run(graph, inputs)
    assert len(calls) == 1 and torch.equal(out, want)
    got = torch.autograd.grad(out.sum(), inputs['q_src'])[0]
    assert_close(got, torch.autograd.grad(want.sum(), inputs['q_src'])[0])


def test_triton_tile_follows_the_average_degree(monkeypatch):
    monkeypatch.setattr(launch, 'BLOCK_EDGES', None)
    # Average in-degree 7 and 11: tiles of 8 and 16 edges, not 64; the
    # tile's register budget still caps it.
    assert launch._block_edges(1, 64, 4096, 7.0) == 8
    assert launch._block_edges(1, 64, 4096, 11.0) == 16
    assert launch._block_edges(1, 64, 4096, 500.0) == 64
    assert launch._block_edges(8, 64, 4096, 500.0) == 8
    assert launch._block_edges(1, 4, 4096, 1.0) == launch.MIN_BLOCK_EDGES


def test_triton_hub_split_across_programs(monkeypatch):
    # A hub of 60 incoming edges, blocks of 2 and segments of 8 edges: 8
    # programs share it, in the forward and in the backward's first pass,
    # and the combine kernels merge them; likewise a source hub in the
    # backward's second pass.
    monkeypatch.setattr(launch, 'BLOCK_EDGES', 2)
    monkeypatch.setattr(launch, 'SEGMENT_EDGES', 8)
    grids = []
    run_fwd = kernels.gate_fwd_kernel.run

    def spy(*args, grid, **kwargs):
        grids.append(grid[0])
        return run_fwd(*args, grid=grid, **kwargs)

    monkeypatch.setattr(kernels.gate_fwd_kernel, 'run', spy)
    combined = []
    for name in ('gate_bwd_combine_kernel', 'gate_bwd_src_combine_kernel'):
        kernel = getattr(kernels, name)

        def spy_combine(*args, _run=kernel.run, _name=name, **kwargs):
            combined.append(_name)
            return _run(*args, **kwargs)

        monkeypatch.setattr(kernel, 'run', spy_combine)
    graph = _star(60)
    src, dst, loop, masked, n = graph
    masked = torch.zeros_like(loop)
    masked[7] = True  # a masked edge inside a segment of the hub
    graph = (src, dst, loop, masked, n)
    inputs = make_inputs(n, n, src.numel(), 2, 3, 2)
    check_against(chunked_attention, graph, inputs, 0.1, dense=False)
    assert grids and grids[0] >= n + 60 // 8 - 1
    # Both backward passes split nodes (launched when the shapes allow a
    # split: more edges than a segment):
    assert sorted(combined) == [
        'gate_bwd_combine_kernel',
        'gate_bwd_src_combine_kernel',
    ]
    # A source of out-degree 60 (the edges reversed), split in the
    # backward's second pass:
    reverse = (dst, src, loop, None, n)  # masking 0 -> 7 would empty 7
    check_against(chunked_attention, reverse, inputs, 0.1, dense=False)
    torch.manual_seed(0)
    alpha, out = triton_run(graph, inputs, 0.0, 0.3, True)
    keep = alpha != 0
    d_alpha, d_out = dense_attention(
        src, dst, loop, masked, n, inputs, 0.0, keep=keep, p=0.3
    )
    assert_close(out, d_out, what='out with dropout vs dense')


def test_triton_launches_under_the_tensors_device(monkeypatch):
    entered = []
    inside = []
    on_device = launch._on_device

    class Guard:
        def __init__(self, device):
            self.device = device

        def __enter__(self):
            entered.append(self.device)
            inside.append(True)

        def __exit__(self, *exc):
            inside.pop()

    # The attention kernels, and those that finish the CSR and the work
    # lists of split nodes (segments of 4 edges here):
    from torch_geometric_gate.ops.triton import _csr, _launch_backward

    monkeypatch.setattr(launch, 'BLOCK_EDGES', 2)
    monkeypatch.setattr(launch, 'SEGMENT_EDGES', 4)
    names = ('gate_fwd_kernel', 'gate_alpha_kernel', 'gate_bwd_dst_kernel',
             'gate_bwd_src_kernel', 'gate_combine_kernel', 'gate_csr_kernel',
             'gate_rev_pos_kernel', 'gate_seg_count_kernel',
             'gate_seg_node_kernel', 'gate_att_grad_kernel')  # fmt: skip
    launched = []
    for name in names:
        kernel = getattr(kernels, name)

        def spy(*args, _run=kernel.run, _name=name, **kwargs):
            launched.append((_name, bool(inside)))
            return _run(*args, **kwargs)

        monkeypatch.setattr(kernel, 'run', spy)
    monkeypatch.setattr(launch, '_on_device', Guard)
    monkeypatch.setattr(_launch_backward, '_on_device', Guard)
    monkeypatch.setattr(_csr, 'on_device', Guard)
    graph, inputs = _triton_inputs()
    alpha, out = triton_run(graph, inputs)
    (alpha.sum() + out.sum()).backward()
    assert {n for n, _ in launched} == set(names)
    assert all(ok for _, ok in launched)
    assert entered and all(d == inputs['value'].device for d in entered)
    # On CUDA, the guard is torch.cuda.device of the tensors' device:
    guard = on_device(torch.device('cuda', 1))
    assert isinstance(guard, torch.cuda.device) and guard.idx == 1


def test_triton_saves_no_index_copies_for_double_backward():
    # Issue 34: src, dst (int64), loop and masked (bool) were saved on
    # every call for the double backward alone (18 bytes per edge); it
    # rebuilds them from the CSR the backward keeps now (9 bytes per edge:
    # the permutation and the sources in int32, the edge kinds in int8).
    graph, inputs = _triton_inputs()
    num_edges = graph[0].numel()
    packed = []

    def pack(t):
        packed.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        alpha, out = triton_run(graph, inputs)
    edge_bytes = sum(
        t.numel() * t.element_size()
        for t in packed
        if t.dim() == 1 and t.numel() == num_edges
    )
    assert edge_bytes == 9 * num_edges
    assert not any(t.dtype == torch.int64 for t in packed)


def _op_args(graph, inputs, need_weights=True):
    r"""The arguments of the ``triton_attention`` custom operator."""
    src, dst, loop, masked, num_dst = graph
    g, _ = bundle(graph, inputs)
    csr = forward_csr(g)
    kind = (loop.to(torch.int8) + 2 * masked.to(torch.int8))[csr.perm.long()]
    return (
        *(inputs[name] for name in NAMES), csr.perm, csr.src, csr.rowptr,
        kind, num_dst, 0.0, 0.0, need_weights,
        tops._option_list(current_settings()),
    )  # fmt: skip


@pytest.mark.parametrize('edge_dim,need_weights', [(None, False), (2, True)])
def test_triton_custom_ops_pass_opcheck(edge_dim, need_weights):
    graph, inputs = _triton_inputs(edge_dim)
    op = torch.ops.torch_geometric_gate.triton_attention
    args = _op_args(graph, inputs, need_weights)
    torch.library.opcheck(op, args)
    alpha, out, lse, seed = op(*args)
    assert alpha.size(0) == (graph[0].numel() if need_weights else 0)
    # The eager kernels' results:
    want_alpha, want_out = triton_run(graph, inputs, need_weights=True)
    assert torch.equal(out, want_out)
    if need_weights:
        assert torch.equal(alpha, want_alpha)
    backward = torch.ops.torch_geometric_gate.triton_attention_backward
    bargs = (
        torch.randn_like(alpha) if need_weights else None,
        torch.randn_like(out), *args[:11], lse, seed, graph[-1], 0.0, 0.0,
        args[-1], [t is not None for t in args[:7]],
    )  # fmt: skip
    # Detached: its own backward is not registered (no double backward).
    bargs = tuple(a.detach() if isinstance(a, Tensor) else a for a in bargs)
    torch.library.opcheck(backward, bargs)
    grads = backward(*bargs)
    assert [g.shape for g in grads] == [
        t.shape for t in args[:7] if t is not None
    ]


def test_triton_backward_operator_returns_the_strides_it_declares():
    # Inputs of permuted strides: the fake implementation declared
    # gradients of their strides (`empty_like`), the kernels returned
    # contiguous ones (and the edge features' of their strides), and
    # Inductor's compiled backward failed its stride assertion.
    graph, inputs = _triton_inputs(2)
    for name, t in inputs.items():  # The same values, permuted strides:
        dims = list(reversed(range(t.dim())))
        inputs[name] = t.detach().permute(dims).contiguous().permute(dims)
        assert not inputs[name].is_contiguous(), name
    args = _op_args(graph, inputs)
    alpha, out, lse, seed = torch.ops.torch_geometric_gate.triton_attention(
        *args
    )
    bargs = (
        torch.randn_like(alpha), torch.randn_like(out), *args[:11], lse,
        seed, graph[-1], 0.0, 0.0, args[-1], [True] * 7,
    )  # fmt: skip
    backward = torch.ops.torch_geometric_gate.triton_attention_backward
    torch.library.opcheck(backward, bargs)


def test_custom_operators_with_dropout_read_no_scalar(monkeypatch):
    # The operators under torch.compile drew the dropout seed with .item()
    # and the backward read it back with .item(): on a GPU a host read per
    # call, and a seed fixed at capture in a CUDA graph. The seed is a [1]
    # tensor on the inputs' device that the kernels read.
    graph, inputs = _triton_inputs(None)
    args = list(_op_args(graph, inputs))
    args[13] = p = 0.5  # p_drop
    args = [a.detach() if isinstance(a, Tensor) else a for a in args]
    items = []
    item = Tensor.item
    monkeypatch.setattr(
        Tensor, 'item', lambda t: items.append(t.shape) or item(t)
    )
    op = torch.ops.torch_geometric_gate
    alpha, out, lse, seed = op.triton_attention(*args)
    grad_out = torch.randn_like(out)
    need = [t is not None for t in args[:7]]
    got = op.triton_attention_backward(
        None, grad_out, *args[:11], lse, seed, *args[11:14], args[-1], need
    )
    monkeypatch.undo()
    assert items == []
    assert seed.device == out.device and seed.dtype == torch.int64
    # Forward and backward drop the same weights: against the dense
    # computation with the mask the weights show.
    keep = alpha != 0
    assert 0 < int((~keep).sum()) < keep.numel()
    d_alpha, d_out = dense_attention(*graph, inputs, 0.0, keep=keep, p=p)
    assert_close(alpha, d_alpha, what='alpha')
    assert_close(out, d_out, what='out')
    want = grads(
        (d_alpha, d_out), inputs, torch.zeros_like(d_alpha),
        grad_out.double(),
    )  # fmt: skip
    for (name, w), g in zip(want.items(), got):
        assert_close(g, w, what=f'grad {name}')


def _compiled_layer_steps(dropout):
    r"""The output, the input's gradient and the parameters' gradients of
    a GATEConv step under the Triton kernels, eager and compiled
    (:obj:`fullgraph=True`, dynamic shapes), with the same seed."""
    from torch_geometric_gate import GATEConv, attention_kernel

    torch.manual_seed(0)
    x = torch.randn(30, 8, device=DEVICE)
    edge_index = torch.randint(30, (2, 120), device=DEVICE)
    edge_attr = torch.randn(120, 3, device=DEVICE)
    conv = GATEConv(8, 4, heads=2, edge_dim=3, dropout=dropout).to(DEVICE)
    torch.nn.init.normal_(conv.att_neighbor)
    torch.nn.init.normal_(conv.att_self)

    def step(fn):
        conv.zero_grad()
        x_ = x.clone().requires_grad_()
        torch.manual_seed(1)
        out, (_, alpha) = fn(x_, edge_index, edge_attr,
                             return_attention_weights=True)  # fmt: skip
        (out.square().sum() + alpha.square().sum()).backward()
        return [out, alpha, x_.grad] + [p.grad for p in conv.parameters()]

    torch._dynamo.reset()
    with attention_kernel('triton'):
        eager = step(conv)
        compiled = step(torch.compile(conv, fullgraph=True, dynamic=True))
    return eager, compiled


@pytest.mark.slow
@pytest.mark.parametrize('dropout', [0.0, 0.4])
def test_triton_kernels_under_torch_compile(dropout):
    # The custom operators: no graph break (fullgraph), the eager kernels'
    # results, the same dropout mask for the same seed.
    eager, compiled = _compiled_layer_steps(dropout)
    assert torch.equal(eager[1] == 0, compiled[1] == 0)
    for want, got in zip(eager, compiled):
        assert_close(got, want, what='compiled against eager')


@pytest.mark.slow
def test_compiled_triton_kernels_save_what_eager_ones_save():
    from torch_geometric_gate import GATEConv, attention_kernel

    torch.manual_seed(0)
    x = torch.randn(60, 16, device=DEVICE)
    edge_index = torch.randint(60, (2, 1200), device=DEVICE)
    conv = GATEConv(16, 8, heads=4).to(DEVICE)

    torch._dynamo.reset()
    with attention_kernel('triton'):
        compiled = torch.compile(conv, fullgraph=True)
        compiled(x, edge_index).sum().backward()  # Compiles.
        eager = saved_bytes(conv, x, edge_index)
        got = saved_bytes(compiled, x, edge_index)
    # No [E, H, C] tensor either way (1260 edges * 32 channels * 4 bytes):
    assert eager < 1260 * 32 * 4
    assert got <= 1.1 * eager


@pytest.mark.parametrize('dtype', [torch.bfloat16])
def test_triton_sharp_softmax_gradients_in_low_precision(dtype):
    # As anemoi found (their PR #1172): a sharp softmax under bfloat16
    # needs the backward's delta in float32, not from a bfloat16 output.
    # The kernels keep only the float32 log-sum-exp and recompute delta in
    # float32: gradients match the float64 computation on the same
    # (rounded) inputs to float32 accuracy, not bfloat16's.
    graph = make_graph()
    src, dst, loop, masked, num = graph
    inputs = make_inputs(num, num, src.numel(), 2, 4, None, dtype,
                         torch.float32)  # fmt: skip
    with torch.no_grad():
        for k in ('att_neighbor', 'att_self'):
            inputs[k] *= 40.0  # scores of tens: weights near 0 and 1
    alpha, out = triton_run(graph, inputs)
    top = alpha[~masked].float().amax()
    assert top > 0.99
    gen = torch.Generator().manual_seed(1)
    g_out = torch.randn(out.shape, generator=gen).to(DEVICE)
    g_alpha = torch.zeros(alpha.shape, device=DEVICE)
    got = grads((alpha, out), inputs, g_alpha, g_out)
    d_alpha, d_out = dense_attention(src, dst, loop, masked, num, inputs, 0.0)
    want = grads((d_alpha, d_out), inputs, g_alpha.double(), g_out.double())
    for k in ('att_neighbor', 'att_self'):
        scale = want[k].abs().max()
        err = (got[k].double() - want[k]).abs().max()
        assert err <= 1e-4 * scale + 1e-5, (k, float(err), float(scale))
    # anemoi's check (their PR #1027): when every neighbour sends the same
    # message, the output does not depend on the weights, so the gradients
    # of the scores' inputs vanish; a delta taken from a bfloat16 output
    # leaves them of order one (anemoi measured 1.5 and 18.8).
    with torch.no_grad():
        inputs['value'].copy_(inputs['value'][:1].expand_as(inputs['value']))
    alpha, out = triton_run(graph, inputs)
    got = grads((alpha, out), inputs, g_alpha, g_out)
    for k in ('q_src', 'q_dst', 'att_neighbor', 'att_self'):
        assert got[k].abs().max() <= 1e-3, (k, float(got[k].abs().max()))
    assert got['value'].abs().max() > 0.1


class _CountOps(torch.utils._python_dispatch.TorchDispatchMode):
    r"""Counts the ATen operations run, and the :func:`repeat_interleave`
    calls without an :obj:`output_size` (which sync with the device)."""

    def __init__(self):
        super().__init__()
        self.counts, self.unsized_repeats = {}, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.counts[name] = self.counts.get(name, 0) + 1
        if (
            name == 'repeat_interleave'
            and (kwargs or {}).get('output_size') is None
        ):
            self.unsized_repeats += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize('dropout', [0.0, 0.5])
@pytest.mark.parametrize('form', ['plain', 'EdgeIndex-col'])
def test_triton_step_has_no_host_sync_and_sorts_at_most_once(form, dropout):
    # Issue 48.1, the host floor: a training step issues no operation that
    # syncs with the device (.item(), nonzero, repeat_interleave without
    # output_size), with dropout too (its seed is drawn on the device and
    # read there by the kernels); a plain edge_index is sorted once per
    # step (the forward sorts the targets and the sources in one sort; the
    # backward reuses both groupings); a column-sorted EdgeIndex never, past
    # the first step (PyG caches its CSR).
    from torch_geometric import EdgeIndex

    from torch_geometric_gate import GATEConv, attention_kernel

    torch.manual_seed(0)
    conv = GATEConv(8, 4, heads=2, dropout=dropout).to(DEVICE)
    x = torch.randn(50, 8, device=DEVICE, requires_grad=True)
    edge_index = torch.randint(0, 50, (2, 300), device=DEVICE)
    if form == 'EdgeIndex-col':
        edge_index = EdgeIndex(edge_index, sparse_size=(50, 50))
        edge_index = edge_index.sort_by('col')[0]
    with attention_kernel('triton'):
        conv(x, edge_index).sum().backward()  # PyG's caches filled
        with _CountOps() as ops:
            conv(x, edge_index).sum().backward()
    for name in ('nonzero', '_local_scalar_dense', 'item'):
        assert ops.counts.get(name, 0) == 0, name
    assert ops.unsized_repeats == 0
    sorts = ops.counts.get('sort', 0) + ops.counts.get('argsort', 0)
    assert sorts == (1 if form == 'plain' else 0)


def test_triton_reads_rows_of_one_product_in_place_and_copies_others():
    # The layer's projections are views of one [N, 3, H, C] product, rows
    # 3 H C apart: read in place. Any other layout is copied once.
    fused = torch.randn(5, 3, 2, 4, device=DEVICE)
    views = fused.unbind(1)
    *got, stride = launch._rows(*views)
    assert stride == 24 and all(a is b for a, b in zip(got, views))
    for odd in (
        torch.randn(5, 2, 4, device=DEVICE),  # rows 8 apart
        torch.randn(5, 4, 2, device=DEVICE).transpose(1, 2),
    ):
        *got, stride = launch._rows(views[0], odd, views[2])
        assert stride == 8 and all(t.is_contiguous() for t in got)
        assert torch.equal(got[1], odd)


@pytest.mark.parametrize('heads,one_head', [(3, False), (1, True)])
def test_triton_views_of_one_product_match_dense(heads, one_head):
    from torch_geometric_gate import attention_kernel

    graph = make_graph()
    inputs = make_inputs(7, 7, graph[0].numel(), heads, 5, 2, seed=3)
    gen = torch.Generator().manual_seed(4)
    fused = torch.randn(7, 3, heads, 5, generator=gen, dtype=torch.float64)
    fused = fused.to(DEVICE, torch.float32).requires_grad_()
    inputs['q_src'], inputs['q_dst'], inputs['value'] = fused.unbind(1)
    with attention_kernel('triton', triton_one_head_layout=one_head):
        check_against(chunked_attention, graph, inputs, slope=0.2)


class _OpNames(TorchDispatchMode):
    # The ATen operators issued while active, by name.
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(
    'heads,one_head,seg', [(3, False, None), (1, True, None), (2, False, 4),
                           (1, True, 4)],
)  # fmt: skip
def test_triton_differentiates_the_projection_product_in_place(
    heads, one_head, seg, monkeypatch
):
    # Given the [N, 3 H C] product whose views the projections are
    # (AttentionInputs.product), the autograd function differentiates it
    # in their place: the same gradients as autograd's through the three
    # views (the kernels write at stride 3 H C; with segments of 4 edges
    # the split nodes' combine kernels too), without a stack of the three.
    from torch_geometric_gate import attention_kernel
    from torch_geometric_gate.ops import projection_product

    if seg:
        monkeypatch.setattr(launch, 'BLOCK_EDGES', 2)
        monkeypatch.setattr(launch, 'SEGMENT_EDGES', seg)
    graph = make_graph()
    inputs = make_inputs(7, 7, graph[0].numel(), heads, 5, 2, seed=3)
    gen = torch.Generator().manual_seed(4)
    product = torch.randn(7, 3 * heads * 5, generator=gen).to(DEVICE)
    product.requires_grad_()
    value, q_src, q_dst = product.view(7, 3, heads, 5).unbind(1)
    assert projection_product(q_src, q_dst, value) is product
    inputs.update(q_src=q_src, q_dst=q_dst, value=value)
    wanted = [product] + [
        inputs[k] for k in NAMES[3:] if inputs[k] is not None
    ]
    got = {}
    with attention_kernel('triton', triton_one_head_layout=one_head):
        for given in (product, None):
            bundled = bundle(graph, inputs, 0.2)
            projections = AttentionInputs(
                q_src, q_dst, value, inputs['edge_attr'], given
            )
            alpha, out = tops.triton_attention(
                *bundled, projections, current_settings()
            )
            seeds = torch.Generator().manual_seed(1)
            grad_alpha = torch.randn(alpha.shape, generator=seeds)
            grad_out = torch.randn(out.shape, generator=seeds)
            with _OpNames() as ops:
                got[given is None] = torch.autograd.grad(
                    (alpha, out), wanted,
                    (grad_alpha.to(DEVICE), grad_out.to(DEVICE)),
                )  # fmt: skip
            assert ('aten.stack' in ops.names) == (given is None)
    for a, b, t in zip(got[False], got[True], wanted):
        assert a.shape == t.shape
        assert_close(a, b, what='the product vs its three views')


def test_triton_double_backward_through_the_projection_product():
    # With the product given, the double backward (the chunked kernels
    # under autograd) differentiates the product too: a gradient
    # penalty's gradients as through the three views.
    graph = make_graph()
    inputs = make_inputs(7, 7, graph[0].numel(), 2, 4, 2, seed=5)
    gen = torch.Generator().manual_seed(6)
    product = torch.randn(7, 24, generator=gen).to(DEVICE).requires_grad_()
    value, q_src, q_dst = product.view(7, 3, 2, 4).unbind(1)
    inputs.update(q_src=q_src, q_dst=q_dst, value=value)
    got = {}
    for given in (product, None):
        projections = AttentionInputs(
            q_src, q_dst, value, inputs['edge_attr'], given
        )
        _, out = tops.triton_attention(
            *bundle(graph, inputs, 0.2), projections, current_settings()
        )
        (g,) = torch.autograd.grad(
            out.square().sum(), product, create_graph=True
        )
        (gg,) = torch.autograd.grad(g.square().sum(), product)
        got[given is None] = (g, gg)
    for a, b in zip(got[False], got[True]):
        assert_close(a, b, what='the product vs its three views')


def test_triton_refuses_a_product_the_projections_are_not_views_of():
    graph = make_graph()
    inputs = make_inputs(7, 7, graph[0].numel(), 2, 4, None)
    other = torch.randn(7, 24, device=DEVICE)
    projections = AttentionInputs(
        inputs['q_src'], inputs['q_dst'], inputs['value'], None, other
    )
    with pytest.raises(ValueError, match="'AttentionInputs.product' must"):
        tops.triton_attention(
            *bundle(graph, inputs), projections, current_settings()
        )


def test_triton_refuses_a_product_without_the_gradient_its_views_need():
    # Views that require grad of a product that does not: their gradients
    # were the product's, which autograd dropped (q_src.grad stayed None).
    graph = make_graph()
    gen = torch.Generator().manual_seed(0)
    product = torch.randn(7, 24, generator=gen).to(DEVICE)
    value, q_src, q_dst = (
        t.requires_grad_() for t in product.view(7, 3, 2, 4).unbind(1)
    )
    inputs = make_inputs(7, 7, graph[0].numel(), 2, 4, None)
    inputs.update(q_src=q_src, q_dst=q_dst, value=value)
    projections = AttentionInputs(q_src, q_dst, value, None, product)
    with pytest.raises(ValueError, match='must require grad where its views'):
        tops.triton_attention(
            *bundle(graph, inputs), projections, current_settings()
        )


@pytest.mark.parametrize('rows,width', [(1, 6), (70, 30), (33, 300)])
def test_triton_attention_vector_gradients_sum_the_programs(rows, width):
    # gate_att_grad_kernel sums the rows of the target-side pass's
    # programs into one row (several column blocks and row blocks, both
    # with a ragged end), against a float64 sum.
    from torch_geometric_gate.ops.triton._launch_backward import (
        ATT_GRAD_BLOCK,
        ATT_GRAD_ROWS,
    )

    gen = torch.Generator().manual_seed(rows)
    sums = torch.randn(rows, width, generator=gen).to(DEVICE)
    out = torch.full((width + 1,), 7.0, device=DEVICE)
    kernels.gate_att_grad_kernel[(-(-width // ATT_GRAD_BLOCK),)](
        sums, out, rows, width, ATT_GRAD_ROWS, ATT_GRAD_BLOCK
    )
    want = sums.double().sum(0).float()
    assert_close(out[:width], want, what='the sum')
    assert out[width] == 7.0  # Nothing written past the row.


def _lists_of(work, num):
    # A WorkList's segment pointer, program nodes and slot pointer over
    # `num` nodes, read as the kernels do (_tiles._work_list).
    flat = work.lists.view(-1)
    segptr = flat[work.first : work.first + num + 1]
    partptr = flat[work.first + work.width :][:num]
    return segptr, work.nodes[work.node_first :][: work.grid], partptr


@pytest.mark.parametrize('seg', [1, 3, 8])
def test_triton_work_lists_of_split_nodes(seg):
    # The work lists of one or two row pointers (the CSR's and the reverse
    # CSR's, of different node counts) from two launches and a prefix sum:
    # every node's segments (at least one, ceil(deg / seg)), the node of
    # every program (num past the last segment) and the partial slots of
    # split nodes, against a loop over the nodes.
    from torch_geometric_gate.ops.triton._csr import segments

    degs = ([0, 5, 1, 0, 17, 3, 8, 0, 2], [9, 0, 13, 4, 10])
    assert sum(degs[0]) == sum(degs[1])
    num_edges = sum(degs[0])
    lists = [
        (torch.tensor([0, *deg]).cumsum(0).int().to(DEVICE), len(deg))
        for deg in degs
    ]
    both = segments(lists, num_edges, seg)
    alone = [segments([rows], num_edges, seg)[0] for rows in lists]
    for deg, got, got_alone in zip(degs, both, alone):
        num, grid, slots = len(deg), got.grid, got.slots
        segptr, seg_node, partptr = _lists_of(got, num)
        # Both lists in one pair of buffers, read in place:
        assert got.lists is both[0].lists and got.nodes is both[0].nodes
        assert grid == num + num_edges // seg
        assert slots == 2 * (num_edges // seg)
        counts = [max(1, -(-d // seg)) for d in deg]
        want_node = [v for v, c in enumerate(counts) for _ in range(c)]
        want_node += [num] * (grid - len(want_node))
        split = [c if c > 1 else 0 for c in counts]
        want_ptr = [0, *torch.tensor(counts).cumsum(0).tolist()]
        assert segptr[: num + 1].tolist() == want_ptr
        assert seg_node.tolist() == want_node
        assert partptr[:num].tolist() == [sum(split[:v]) for v in range(num)]
        assert sum(split) <= slots
        for t in (segptr, seg_node, partptr):
            assert t.dtype == torch.int32
        # Listed alone, the same list (in buffers of its own):
        for a, b in zip((segptr, seg_node, partptr),
                        _lists_of(got_alone, num)):  # fmt: skip
            assert torch.equal(a, b)


@pytest.mark.parametrize('heads,one_head', [(3, False), (1, True)])
@pytest.mark.parametrize('layout', ['expanded', 'transposed'])
def test_triton_backward_reads_the_output_gradient_with_its_strides(
    heads, one_head, layout
):
    # A loss that sums or averages over the heads gives an expanded output
    # gradient (strides 0), read in place: the same gradients as from its
    # contiguous copy, and as the dense computation's.
    from torch_geometric_gate import attention_kernel

    graph = make_graph()
    inputs = make_inputs(7, 7, graph[0].numel(), heads, 5, 2, seed=6)
    gen = torch.Generator().manual_seed(7)
    if layout == 'expanded':
        grad_out = torch.randn(7, 1, 5, generator=gen).expand(7, heads, 5)
    else:
        grad_out = torch.randn(7, 5, heads, generator=gen).transpose(1, 2)
    grad_out = grad_out.to(DEVICE)
    assert not grad_out.is_contiguous() or heads == 1
    with attention_kernel('triton', triton_one_head_layout=one_head):
        alpha, out = run(tops.triton_attention, graph, inputs, 0.2)
        grad_alpha = torch.zeros_like(alpha)
        got = grads((alpha, out), inputs, grad_alpha, grad_out)
        alpha, out = run(tops.triton_attention, graph, inputs, 0.2)
        want = grads((alpha, out), inputs, grad_alpha, grad_out.contiguous())
    src, dst, loop, masked, num_dst = graph
    dense = grads(
        dense_attention(src, dst, loop, masked, num_dst, inputs, 0.2),
        inputs, grad_alpha.double(), grad_out.double(),
    )  # fmt: skip
    for name in got:
        assert_close(got[name], want[name], what=name)
        assert_close(got[name], dense[name], what=f'{name} vs dense')


@pytest.mark.parametrize('edge_dim', [None, 2])
def test_triton_layer_on_a_graph_without_nodes(edge_dim):
    # The layer's projections are the views of one product [0, 3 * H * C]:
    # its gradient (backward and double backward) keeps its 0 rows.
    from torch_geometric_gate import GATEConv
    from torch_geometric_gate.ops import attention_kernel

    conv = GATEConv(5, 4, heads=2, edge_dim=edge_dim).to(DEVICE)
    x = torch.randn(0, 5, device=DEVICE, requires_grad=True)
    empty = torch.empty(2, 0, dtype=torch.long, device=DEVICE)
    edge_attr = None if edge_dim is None else torch.randn(0, 2).to(DEVICE)
    with attention_kernel('triton'):
        out = conv(x, empty, edge_attr)
        assert out.shape == (0, 8)
        (grad,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        assert grad.shape == (0, 5)
        (weight_grad,) = torch.autograd.grad(
            out.sum(), conv.lin.weight, create_graph=True
        )
        weight_grad.square().sum().backward()
    assert torch.equal(weight_grad, torch.zeros_like(conv.lin.weight))


@pytest.mark.parametrize('heads,channels,edge_dim', [(1, 4, 0), (2, 3, 2)])
@pytest.mark.parametrize('dropout', [0.0, 0.4])
def test_loop_weights_only_are_the_last_rows_of_all_weights(
    heads, channels, edge_dim, dropout
):
    # `loop_weights_only`: the appended loops' weights alone [num_loops, H]
    # (N x H written), equal to the last rows of all weights and of the
    # chunked kernels'; the same output, gradients and double backward.
    graph = make_graph()
    num_dst = graph[4]
    num_loops = num_dst - 1  # The last edges: (v, v) for v < num_loops.
    inputs = make_inputs(
        num_dst, num_dst, graph[0].numel(), heads, channels, edge_dim
    )
    projections = AttentionInputs(
        inputs['q_src'], inputs['q_dst'], inputs['value'],
        inputs['edge_attr'],
    )  # fmt: skip
    weights = torch.randn(num_loops, heads, device=DEVICE)
    wanted = [t for t in inputs.values() if t is not None]
    results = []
    for fn, loops_only in (
        (tops.triton_attention, True),
        (tops.triton_attention, False),
        (chunked_attention, False),
    ):
        g, p = bundle(
            graph, inputs, 0.1, dropout, dropout > 0, num_loops=num_loops
        )
        p = p._replace(loop_weights_only=loops_only)
        torch.manual_seed(3)  # The same dropout draw (Triton's).
        out, alpha = fn(g, p, projections, current_settings())
        if loops_only:
            assert alpha.shape == (num_loops, heads)
        alpha = alpha[alpha.size(0) - num_loops :]
        loss = (alpha * weights).sum() + out.square().sum()
        grads = torch.autograd.grad(loss, wanted, create_graph=True)
        second = torch.autograd.grad(
            sum(gr.square().sum() for gr in grads), wanted[:3]
        )
        results.append((out, alpha, *grads, *second))
    if dropout > 0:
        assert bool((results[0][1] == 0).any())  # Some loops dropped.
    for got, want in zip(*results[:2]):
        torch.testing.assert_close(got, want, atol=ATOL, rtol=RTOL)
    if dropout == 0:  # (The chunked kernels draw their own mask.)
        for got, want in zip(results[0], results[2]):
            torch.testing.assert_close(got, want, atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize('p_drop', [0.0, 0.5])
def test_compiled_operator_returns_no_cpu_tensor(p_drop):
    # An operator with a CPU output is left out of a CUDA graph (Inductor's
    # graph partitioning, without a skip counted): the seed output was a
    # CPU tensor, so no compiled step's attention was captured. It is on
    # the inputs' device, with dropout too (drawn there, so that each
    # replay draws its own). Fake CUDA tensors here.
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        n, e, heads, channels = 5, 7, 2, 4
        q = torch.empty(n, heads, channels, device='cuda')
        att = torch.empty(1, heads, channels, device='cuda')
        index = torch.empty(e, dtype=torch.long, device='cuda')
        rowptr = torch.empty(n + 1, dtype=torch.long, device='cuda')
        kind = torch.empty(e, dtype=torch.int8, device='cuda')
        outputs = torch.ops.torch_geometric_gate.triton_attention(
            q, q, q, None, None, att, att, index, index, rowptr, kind, n,
            0.2, p_drop, False, [4096, 2048, 0, 4, 0, 0],
        )  # fmt: skip
    devices = [t.device.type for t in outputs]
    assert devices == ['cuda'] * 4
