r"""The Triton kernels of issue 48, item 2 (kernels that fill the tiles),
each against the kernels they may replace, the chunked kernels and a dense
float64 computation: on CPU under the Triton interpreter
(``TRITON_INTERPRET=1``, tiny graphs), compiled on a GPU otherwise.

They run through the launch helpers of ``ops.triton._launch`` on the CSR
and settings that :func:`~torch_geometric_gate.ops.triton.triton_attention`
builds (:func:`prepare` here), so that the dispatch can switch to them once
they are measured on a GPU.
"""

import importlib.util
import inspect
import os
import sys

import pytest
import torch

if importlib.util.find_spec('triton') is None:
    pytest.skip('Triton is not installed', allow_module_level=True)
if importlib.util.find_spec('numpy') is None:  # The interpreter needs it.
    pytest.skip('NumPy is not installed', allow_module_level=True)

INTERPRET = os.environ.get('TRITON_INTERPRET') == '1'
ON_GPU = torch.cuda.is_available() and not INTERPRET
if not ON_GPU and not INTERPRET:
    os.environ['TRITON_INTERPRET'] = '1'
    if 'triton.language' in sys.modules:
        pytest.skip(
            'Triton was imported before TRITON_INTERPRET=1 was set; run '
            'this module on its own or set TRITON_INTERPRET=1',
            allow_module_level=True,
        )

from torch_geometric import EdgeIndex  # noqa: E402

from torch_geometric_gate.ops.chunked import chunked_attention  # noqa: E402
from torch_geometric_gate.ops.switch import current_settings  # noqa: E402
from torch_geometric_gate.ops.triton import _launch as launch  # noqa: E402
from torch_geometric_gate.ops.triton import (  # noqa: E402
    _launch_backward as launch_backward,
)
from torch_geometric_gate.ops.triton._csr import (  # noqa: E402
    csr_and_reverse,
)
from torch_geometric_gate.ops.types import (  # noqa: E402
    AttentionGraph,
    AttentionInputs,
    AttentionParams,
)

DEVICE = torch.device('cuda' if ON_GPU else 'cpu')
ATOL, RTOL = 2e-5, 1e-4


def chunked_inputs(i):
    # The chunked kernels' named inputs, from this file's dict of tensors.
    return AttentionInputs(i['q_src'], i['q_dst'], i['value'], i['edge_attr'])


def make_case(heads, channels, edge_dim, num_nodes=9, extra=(), seed=0,
              sorted_index=False, dtype=torch.float32):  # fmt: skip
    r"""A graph of the layer's form: the caller's edges (node 0 a hub, an
    input self-loop masked, node :obj:`num_nodes - 1` without incoming
    edges but its loop), then :obj:`num_nodes` appended self-loops; and
    its inputs. With :obj:`sorted_index`, the caller's edges as a
    column-sorted :class:`EdgeIndex` (the CSR without a sort)."""
    gen = torch.Generator().manual_seed(seed)
    n = num_nodes
    src = [1, 2, 3, 4, 5, 6, 7, 0, 2, 3, 4, 1, 5, 2, 6, *extra[::2]]
    dst = [0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 2, 5, *extra[1::2]]
    src, dst = torch.tensor(src), torch.tensor(dst)
    ei = torch.stack([src, dst])
    if sorted_index:
        ei = EdgeIndex(ei, sparse_size=(n, n)).sort_by('col')[0]
        src, dst = ei.as_tensor().unbind(0)
    num_input = src.numel()
    loops = torch.arange(n)
    src_all = torch.cat([src, loops]).to(DEVICE)
    dst_all = torch.cat([dst, loops]).to(DEVICE)
    loop = torch.cat([torch.zeros(num_input, dtype=torch.bool),
                      torch.ones(n, dtype=torch.bool)])  # fmt: skip
    masked = torch.cat([src == dst, torch.zeros(n, dtype=torch.bool)])
    graph = AttentionGraph(
        src_all, dst_all, loop.to(DEVICE), masked.to(DEVICE), n, n, n,
        ei.to(DEVICE) if sorted_index else None,
    )  # fmt: skip

    def rand(*shape):
        t = torch.randn(*shape, generator=gen, dtype=torch.float64)
        return t.to(DEVICE, dtype).requires_grad_()

    inputs = dict(
        q_src=rand(n, heads, channels),
        q_dst=rand(n, heads, channels),
        value=rand(n, heads, channels),
        edge_attr=rand(src_all.numel(), edge_dim) if edge_dim else None,
        weight_edge=rand(heads * channels, edge_dim) if edge_dim else None,
        att_neighbor=rand(1, heads, channels),
        att_self=rand(1, heads, channels),
    )
    return graph, inputs


def params_of(inputs, slope=0.1, dropout=0.0, training=False):
    return AttentionParams(
        inputs['att_neighbor'], inputs['att_self'], inputs['weight_edge'],
        slope, dropout, training, True,
    )  # fmt: skip


def prepare(graph, inputs, params, seed=0):
    r"""The CSR and the settings, as ``triton_attention`` builds them for
    a training step (the reverse CSR with the CSR)."""
    csr, reverse = csr_and_reverse(graph)
    loop, masked = graph.flags()
    kind = loop.to(torch.int8)
    if masked is not None:
        kind = kind + 2 * masked.to(torch.int8)
    kind = kind.index_select(0, csr.perm).contiguous()
    p_drop = float(params.dropout) if params.training else 0.0
    settings = launch._Settings(
        inputs['q_src'], inputs['value'], params.att_neighbor,
        params.att_self, kind, graph.num_dst, params.negative_slope, p_drop,
        torch.tensor([seed]), True, graph.num_loops,
    )  # fmt: skip
    settings.reverse, settings.dst = reverse, csr.dst
    return csr, kind, settings


def forward(graph, inputs, params, seed=0):
    csr, kind, settings = prepare(graph, inputs, params, seed)
    i = {k: (v.detach() if v is not None else None) for k, v in inputs.items()}
    alpha, out, lse = launch._forward(
        i['q_src'], i['q_dst'], i['value'], i['edge_attr'],
        i['weight_edge'], i['att_neighbor'], i['att_self'], csr.perm,
        csr.src, csr.rowptr, settings,
    )  # fmt: skip
    return csr, kind, settings, alpha, out, lse


def dense_alpha(graph, inputs, slope):
    r"""GATE's attention weights :obj:`[E, H]` in float64 with a dense
    :obj:`[N, E]` incidence matrix."""
    i = {k: (v.double() if v is not None else None) for k, v in inputs.items()}
    src, dst = graph.src, graph.dst
    loop, masked = graph.flags()
    z = i['q_src'][src] + i['q_dst'][dst]
    if i['edge_attr'] is not None:
        z = z + (i['edge_attr'] @ i['weight_edge'].t()).view_as(z)
    act = torch.where(z > 0, z, slope * z)
    att = torch.where(loop.view(-1, 1, 1), i['att_self'], i['att_neighbor'])
    score = (act * att).sum(-1)
    member = (
        dst[None, :] == torch.arange(graph.num_dst, device=DEVICE)[:, None]
    )
    member = member & ~masked[None, :]
    scores = torch.where(member[..., None], score[None], float('-inf'))
    top = scores.amax(1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    weight = torch.where(member[..., None], (scores - top).exp(), 0.0)
    total = weight.sum(1, keepdim=True)
    return (weight / torch.where(total > 0, total, 1.0)).sum(0)


def assert_close(actual, expected, atol=ATOL, rtol=RTOL, what=''):
    torch.testing.assert_close(
        actual.double(), expected.double(), atol=atol, rtol=rtol, msg=what
    )


# The self-loop weights alone (N x H rather than E x H) ######################


@pytest.mark.parametrize('sorted_index', [False, True])
@pytest.mark.parametrize('heads,channels,edge_dim', [(1, 4, None), (3, 5, 2)])
def test_loop_weights_match_the_full_weights_and_dense(
    heads, channels, edge_dim, sorted_index
):
    graph, inputs = make_case(heads, channels, edge_dim,
                              sorted_index=sorted_index)  # fmt: skip
    params = params_of(inputs)
    csr, kind, settings, alpha, _, lse = forward(graph, inputs, params)
    i = {k: (v.detach() if v is not None else None) for k, v in inputs.items()}
    got = launch._loop_weights(
        i['q_src'], i['q_dst'], i['edge_attr'], i['weight_edge'],
        i['att_neighbor'], i['att_self'], csr.rowptr, kind, lse, settings,
    )  # fmt: skip
    n = graph.num_loops
    assert got.shape == (n, heads) and got.dtype == alpha.dtype
    # The same float32 computation as the E x H kernel's, row for row:
    assert_close(got, alpha[-n:], atol=1e-6, rtol=1e-6, what='vs E x H')
    assert_close(got, dense_alpha(graph, inputs, 0.1)[-n:], what='vs dense')
    _, want = chunked_attention(
        graph, params, chunked_inputs(i), current_settings()
    )
    assert_close(got, want[-n:], what='vs chunked')
    # The node whose only unmasked edge is its loop: weight 1.
    assert_close(got[n - 1], torch.ones(heads), what='lone loop')


def test_loop_weights_keep_the_dropout_mask_and_block_size(monkeypatch):
    graph, inputs = make_case(2, 3, 2, num_nodes=9)
    params = params_of(inputs, dropout=0.4, training=True)
    csr, kind, settings, alpha, _, lse = forward(graph, inputs, params, 11)
    i = {k: (v.detach() if v is not None else None) for k, v in inputs.items()}
    args = (
        i['q_src'], i['q_dst'], i['edge_attr'], i['weight_edge'],
        i['att_neighbor'], i['att_self'], csr.rowptr, kind, lse, settings,
    )  # fmt: skip
    got = launch._loop_weights(*args)
    n = graph.num_loops
    dropped = got == 0
    assert 0 < int(dropped.sum()) < dropped.numel()
    # The same mask and values (on a GPU, up to the rounding of another
    # tile shape's sums; under the interpreter bit for bit):
    assert torch.equal(got == 0, alpha[-n:] == 0)
    assert_close(got, alpha[-n:], atol=1e-6, rtol=1e-6)
    # Blocks of 4 nodes (three programs, the last one partly masked):
    monkeypatch.setattr(launch, 'BLOCK_EDGES', 4)
    assert_close(launch._loop_weights(*args), got, atol=1e-6, rtol=1e-6)


def test_loop_weights_without_loops_is_empty():
    graph, inputs = make_case(1, 4, None)
    params = params_of(inputs)
    csr, kind, settings, _, _, lse = forward(graph, inputs, params)
    settings.num_loops = 0
    i = {k: (v.detach() if v is not None else None) for k, v in inputs.items()}
    got = launch._loop_weights(
        i['q_src'], i['q_dst'], None, None, i['att_neighbor'],
        i['att_self'], csr.rowptr, kind, lse, settings,
    )  # fmt: skip
    assert got.shape == (0, 1)


# One head in 2-D tiles, several segments per program #########################


def _forward_args(graph, inputs, params, seed=0):
    csr, kind, settings = prepare(graph, inputs, params, seed)
    i = {k: (v.detach() if v is not None else None) for k, v in inputs.items()}
    _, ep = launch._edge_projection(i['edge_attr'], i['weight_edge'], csr.perm)
    return (
        csr, settings, i['q_src'].contiguous(), i['q_dst'].contiguous(),
        i['value'].contiguous(), ep, i['att_neighbor'].contiguous(),
        i['att_self'].contiguous(),
    )  # fmt: skip


def dense_out(graph, inputs, slope):
    alpha = dense_alpha(graph, inputs, slope)
    value = inputs['value'].double()
    member = (
        graph.dst[None, :]
        == torch.arange(graph.num_dst, device=DEVICE)[:, None]
    ).double()
    return torch.einsum(
        'ne,ehc->nhc', member, alpha[..., None] * value[graph.src]
    )


@pytest.mark.parametrize('nodes', [1, 3])
@pytest.mark.parametrize('edge_dim,channels', [(None, 4), (2, 6)])
def test_one_head_forward_matches_the_3d_kernel_and_dense(
    nodes, edge_dim, channels
):
    # Node 8 has no incoming edge but its loop; 9 appended loops; with 3
    # segments per program the last program is partly empty.
    graph, inputs = make_case(1, channels, edge_dim)
    params = params_of(inputs)
    args = _forward_args(graph, inputs, params)
    out, lse = launch._launch_forward_1h(*args, nodes=nodes)
    want_out, want_lse = launch._launch_forward(*args)
    assert out.shape == want_out.shape and out.dtype == want_out.dtype
    assert_close(out, want_out, atol=1e-6, rtol=1e-6, what='out vs 3-D')
    assert_close(lse, want_lse, atol=1e-6, rtol=1e-6, what='lse vs 3-D')
    assert_close(out, dense_out(graph, inputs, 0.1), what='out vs dense')
    i = {k: (v.detach() if v is not None else None) for k, v in inputs.items()}
    chunked, _ = chunked_attention(
        graph, params, chunked_inputs(i), current_settings()
    )
    assert_close(out, chunked, what='out vs chunked')


def test_one_head_forward_splits_a_hub_and_keeps_the_dropout_mask(
    monkeypatch,
):
    # A hub of 40 incoming edges in blocks of 2 and segments of 8 edges:
    # five programs' partial results merged by gate_combine_kernel.
    monkeypatch.setattr(launch, 'BLOCK_EDGES', 2)
    monkeypatch.setattr(launch, 'SEGMENT_EDGES', 8)
    hub = [v for u in range(1, 9) for v in (u, 0)] * 5
    graph, inputs = make_case(1, 5, 2, num_nodes=9, extra=hub)
    params = params_of(inputs)
    args = _forward_args(graph, inputs, params)
    out, lse = launch._launch_forward_1h(*args, nodes=2)
    want_out, want_lse = launch._launch_forward(*args)
    assert_close(out, want_out, atol=1e-6, rtol=1e-6, what='hub out')
    assert_close(lse, want_lse, atol=1e-6, rtol=1e-6, what='hub lse')
    assert_close(out, dense_out(graph, inputs, 0.1), what='hub vs dense')
    # Dropout: the same mask as the 3-D kernel's (drawn per CSR position):
    params = params_of(inputs, dropout=0.4, training=True)
    args = _forward_args(graph, inputs, params, seed=5)
    out, _ = launch._launch_forward_1h(*args)
    want_out, _ = launch._launch_forward(*args)
    assert_close(out, want_out, atol=1e-6, rtol=1e-6, what='dropout')
    args = _forward_args(graph, inputs, params_of(inputs))
    plain, _ = launch._launch_forward(*args)
    assert not torch.allclose(out, plain)


def test_one_head_forward_refuses_several_heads():
    graph, inputs = make_case(2, 4, None)
    args = _forward_args(graph, inputs, params_of(inputs))
    with pytest.raises(ValueError, match='one head, got 2 heads'):
        launch._launch_forward_1h(*args)


# The backward's second pass from the first pass's record ###################

NAMES = ('q_src', 'q_dst', 'value', 'edge_attr', 'weight_edge',
         'att_neighbor', 'att_self')  # fmt: skip


def backward_both(graph, inputs, params, seed=0, with_alpha=True,
                  record=True, one_head_nodes=None):  # fmt: skip
    r"""The gradients of the default backward and of the backward with
    the record (or without, :obj:`record=False`; in the one-head layout
    with :obj:`one_head_nodes` segments per program), and the gradients
    that they take (in the caller's edge order)."""
    csr, kind, settings, alpha, out, lse = forward(graph, inputs, params, seed)
    i = {k: (v.detach() if v is not None else None) for k, v in inputs.items()}
    saved = (*(i[name] for name in NAMES), csr.perm, csr.src, csr.rowptr,
             kind, lse)  # fmt: skip
    gen = torch.Generator().manual_seed(1)
    grad_alpha = torch.randn(alpha.shape, generator=gen).to(DEVICE)
    grad_out = torch.randn(out.shape, generator=gen).to(DEVICE)
    if not with_alpha:
        grad_alpha = None
    need = tuple(i[name] is not None for name in NAMES)
    old = launch_backward._backward(
        saved, settings, grad_alpha, grad_out, need
    )
    if one_head_nodes is not None:
        settings.one_head_layout = True
        settings.one_head_nodes = one_head_nodes
    new = launch_backward._backward(
        saved, settings, grad_alpha, grad_out, need, record=record
    )
    return old, new, grad_alpha, grad_out


def assert_same_grads(old, new, atol=1e-6, rtol=1e-5):
    for name, a, b in zip(NAMES, old, new):
        assert (a is None) == (b is None), name
        if a is not None:
            assert a.dtype == b.dtype, name
            assert_close(b, a, atol, rtol, f'grad {name} with the record')


@pytest.mark.parametrize(
    'heads,channels,edge_dim,with_alpha',
    [(1, 4, None, False), (3, 5, 2, True), (2, 64, 3, True)],
)
def test_backward_record_matches_the_recomputing_backward_and_dense(
    heads, channels, edge_dim, with_alpha
):
    graph, inputs = make_case(heads, channels, edge_dim)
    params = params_of(inputs)
    old, new, grad_alpha, grad_out = backward_both(
        graph, inputs, params, with_alpha=with_alpha
    )
    assert_same_grads(old, new)
    # Against a dense float64 computation of the attention:
    wanted = [inputs[name] for name in NAMES if inputs[name] is not None]
    alpha = dense_alpha(graph, inputs, 0.1)
    out = dense_out(graph, inputs, 0.1)
    outputs = [out] + ([alpha] if with_alpha else [])
    grads = [grad_out.double()]
    if with_alpha:
        grads.append(grad_alpha.double())
    want = iter(torch.autograd.grad(outputs, wanted, grads))
    for name, got in zip(NAMES, new):
        if inputs[name] is not None:
            assert_close(got, next(want), 1e-4, 1e-4, f'grad {name} vs dense')


def test_backward_record_with_dropout_hubs_and_wide_heads(monkeypatch):
    # Hubs split over programs in both passes (a target of 40 edges and
    # its sources' reverse), dropout (the same mask in both passes):
    monkeypatch.setattr(launch, 'BLOCK_EDGES', 2)
    monkeypatch.setattr(launch, 'SEGMENT_EDGES', 8)
    hub = [v for u in range(1, 9) for v in (u, 0)] * 5
    fan = [v for u in range(1, 9) for v in (0, u)] * 3
    graph, inputs = make_case(2, 3, 2, extra=hub + fan)
    params = params_of(inputs, dropout=0.3, training=True)
    old, new, _, _ = backward_both(graph, inputs, params, seed=9)
    assert_same_grads(old, new)
    # More than 64 channels per head: no record (the recomputing kernels).
    graph, inputs = make_case(1, 65, None)
    old, new, _, _ = backward_both(graph, inputs, params_of(inputs))
    for a, b in zip(old, new):
        assert (a is None) == (b is None)
        if a is not None:  # (GPU runs repeat up to rounding)
            assert_close(b, a, atol=1e-6, rtol=1e-5)


# The backward of one head in 2-D tiles, several segments per program ######


def backward_1h(graph, inputs, params, nodes, record, seed=0, with_alpha=True):
    r""":func:`backward_both` against the one-head layout's backward
    (:obj:`nodes` segments per program, with or without the record)."""
    return backward_both(graph, inputs, params, seed, with_alpha,
                         record=record, one_head_nodes=nodes)  # fmt: skip


@pytest.mark.parametrize(
    'nodes,record,edge_dim,channels,with_alpha',
    [
        (1, False, None, 4, False),
        (3, False, 2, 6, True),
        (2, True, 2, 6, True),
        (3, True, None, 4, False),
    ],
)
def test_one_head_backward_matches_the_3d_kernels_and_dense(
    nodes, record, edge_dim, channels, with_alpha, monkeypatch
):
    # Node 8 has no incoming edge but its loop, node 1 no outgoing edge but
    # its loop; with 3 segments per program the last program is partly
    # empty in both passes.
    launched = _launched(monkeypatch)
    graph, inputs = make_case(1, channels, edge_dim)
    params = params_of(inputs)
    old, new, grad_alpha, grad_out = backward_1h(
        graph, inputs, params, nodes, record, with_alpha=with_alpha
    )
    names = {name for name, *_ in launched}
    assert {'gate_bwd_dst_1h_kernel', 'gate_bwd_src_1h_kernel'} <= names
    assert_same_grads(old, new)
    wanted = [inputs[name] for name in NAMES if inputs[name] is not None]
    outputs = [dense_out(graph, inputs, 0.1)]
    grads = [grad_out.double()]
    if with_alpha:
        outputs.append(dense_alpha(graph, inputs, 0.1))
        grads.append(grad_alpha.double())
    want = iter(torch.autograd.grad(outputs, wanted, grads))
    for name, got in zip(NAMES, new):
        if inputs[name] is not None:
            assert_close(got, next(want), 1e-4, 1e-4, f'grad {name} vs dense')


@pytest.mark.parametrize('record', [False, True])
def test_one_head_backward_splits_hubs_and_keeps_the_dropout_mask(
    record, monkeypatch
):
    # A target of 40 edges and a source of 24 in blocks of 2 and segments
    # of 8 edges: split in both passes (their combine kernels), and
    # dropout (the same mask as the 3-D kernels', per CSR position).
    monkeypatch.setattr(launch, 'BLOCK_EDGES', 2)
    monkeypatch.setattr(launch, 'SEGMENT_EDGES', 8)
    hub = [v for u in range(1, 9) for v in (u, 0)] * 5
    fan = [v for u in range(1, 9) for v in (0, u)] * 3
    graph, inputs = make_case(1, 5, 2, extra=hub + fan)
    params = params_of(inputs, dropout=0.3, training=True)
    old, new, _, _ = backward_1h(graph, inputs, params, 2, record, seed=9)
    assert_same_grads(old, new)


# Every kernel compiles for sm_90 (no GPU needed) ############################


def _run_loop_weights(heads, channels, dtype, edge_dim, dropout):
    graph, inputs = make_case(heads, channels, edge_dim, dtype=dtype)
    params = params_of(inputs, dropout=dropout, training=dropout > 0)
    csr, kind, settings, _, _, lse = forward(graph, inputs, params, 3)
    i = {k: (v.detach() if v is not None else None) for k, v in inputs.items()}
    launch._loop_weights(
        i['q_src'], i['q_dst'], i['edge_attr'], i['weight_edge'],
        i['att_neighbor'], i['att_self'], csr.rowptr, kind, lse, settings,
    )  # fmt: skip


#: The new kernels and a function that launches them for a configuration
#: :obj:`(heads, channels, dtype, edge_dim, dropout)`.
def _run_forward_1h(heads, channels, dtype, edge_dim, dropout):
    graph, inputs = make_case(1, channels, edge_dim, dtype=dtype)
    params = params_of(inputs, dropout=dropout, training=dropout > 0)
    launch._launch_forward_1h(*_forward_args(graph, inputs, params, 3))


def _run_backward_record(heads, channels, dtype, edge_dim, dropout):
    graph, inputs = make_case(heads, channels, edge_dim, dtype=dtype)
    params = params_of(inputs, dropout=dropout, training=dropout > 0)
    backward_both(graph, inputs, params, seed=3)


def _run_edge_index_step(heads, channels, dtype, edge_dim, dropout):
    # A column-sorted EdgeIndex: the CSR and the reverse CSR merge the
    # appended loops in (gate_merge_csr_kernel, gate_merge_rev_kernel).
    graph, inputs = make_case(
        heads, channels, edge_dim, dtype=dtype, sorted_index=True
    )
    params = params_of(inputs, dropout=dropout, training=dropout > 0)
    backward_both(graph, inputs, params, seed=3)


def _run_backward_1h(heads, channels, dtype, edge_dim, dropout):
    graph, inputs = make_case(1, channels, edge_dim, dtype=dtype)
    params = params_of(inputs, dropout=dropout, training=dropout > 0)
    for record in (False, True):
        backward_1h(graph, inputs, params, 2, record, seed=3)


NEW_KERNELS = {
    'gate_loop_alpha_kernel': _run_loop_weights,
    'gate_fwd_1h_kernel': _run_forward_1h,
    'gate_bwd_dst_rec_kernel': _run_backward_record,
    'gate_bwd_src_rec_kernel': _run_backward_record,
    'gate_bwd_dst_1h_kernel': _run_backward_1h,
    'gate_bwd_src_1h_kernel': _run_backward_1h,
    'gate_merge_csr_kernel': _run_edge_index_step,
    'gate_merge_rev_kernel': _run_edge_index_step,
}

COMPILE_CONFIGS = [
    (1, 64, torch.float32, None, 0.0),
    (8, 8, torch.bfloat16, 2, 0.3),
    (2, 4, torch.float16, None, 0.0),
]


@pytest.mark.slow
@pytest.mark.skipif(
    not INTERPRET, reason='on a GPU the kernels compile when they run'
)
def test_every_kernel_compiles_for_sm90(tmp_path):
    # The interpreter accepts code that a GPU compiler may reject: every
    # kernel, as these configurations launch it (dtypes, heads, edge
    # features, dropout, double backward; the new kernels of issue 48 by
    # their launch helpers), compiles to a cubin for sm_90 (H100, H200: the
    # GPUs the GPU session gets) with Triton's compiler and the ptxas it
    # ships (benchmark/triton_compile.py), in one process; no GPU needed.
    # (`--arch 80 90` checks A100 too, at twice the time.)
    import json
    import subprocess

    from benchmark_testing import ROOT, load_benchmark

    from torch_geometric_gate.ops.triton import _kernels

    tc = load_benchmark('triton_compile')
    if not tc.has_ptxas():
        pytest.skip('this Triton ships no ptxas (the wheels for x86 Linux do)')
    runs = {name: getattr(_kernels, name).run for name in tc.KERNELS}
    records = tc.record_launches(
        [
            (1, 4, 'float32', None, 0.0),
            (3, 5, 'bfloat16', 2, 0.3),
            (2, 8, 'float16', None, 0.3),
        ],
        double_backward=True,
    )
    assert {r['kernel'] for r in records} == set(tc.KERNELS)
    assert {r['constants']['HAS_EDGE'] for r in records
            if r['kernel'] == 'gate_fwd_kernel'} == {True, False}  # fmt: skip
    # The recording is undone:
    assert all(getattr(_kernels, n).run == run for n, run in runs.items())
    launches = {}
    for name, run_kernel in NEW_KERNELS.items():
        for heads, channels, dtype, edge_dim, dropout in COMPILE_CONFIGS:
            with tc.recording(launches, names=(name,)):
                run_kernel(heads, channels, dtype, edge_dim, dropout)
    assert {r['kernel'] for r in launches.values()} == set(NEW_KERNELS)
    records += list(launches.values())
    path = tmp_path / 'launches.json'
    path.write_text(json.dumps(records))
    env = {k: v for k, v in os.environ.items() if k != 'TRITON_INTERPRET'}
    env['PYTHONPATH'] = ROOT + os.pathsep + env.get('PYTHONPATH', '')
    env['TRITON_CACHE_DIR'] = str(tmp_path / 'cache')  # compile afresh
    script = os.path.join(ROOT, 'benchmark', 'triton_compile.py')
    done = subprocess.run(
        [sys.executable, script, '--launches', str(path), '--arch', '90'],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert f'compiled {len(records)} launches for 1 targets' in done.stdout


# The variants as options of the switch, through the public path ----------

#: (options, the kernels that must run, the kernels that must not):
OPTIONS = {
    'one-head': (
        dict(triton_one_head_layout=True, triton_one_head_nodes=2,
             triton_warps=1),
        {'gate_fwd_1h_kernel', 'gate_bwd_dst_1h_kernel',
         'gate_bwd_src_1h_kernel'},
        {'gate_fwd_kernel', 'gate_bwd_dst_kernel', 'gate_bwd_src_kernel'},
    ),
    'one-head-record': (
        dict(triton_one_head_layout=True, triton_backward_record=True),
        {'gate_fwd_1h_kernel', 'gate_bwd_dst_1h_kernel',
         'gate_bwd_src_1h_kernel'},
        {'gate_bwd_dst_rec_kernel', 'gate_bwd_src_rec_kernel'},
    ),
    'record': (
        dict(triton_backward_record=True),
        {'gate_bwd_dst_rec_kernel', 'gate_bwd_src_rec_kernel'},
        {'gate_bwd_dst_kernel', 'gate_bwd_src_kernel'},
    ),
    'record-warps': (
        dict(triton_backward_record=True, triton_warps=2),
        {'gate_bwd_dst_rec_kernel', 'gate_bwd_src_rec_kernel'}, set(),
    ),
    'tiles': (
        dict(triton_forward_tile=8, triton_backward_tile=16),
        {'gate_fwd_kernel', 'gate_bwd_dst_kernel'}, set(),
    ),
}  # fmt: skip


def _launched(monkeypatch):
    r"""The names of the Triton kernels launched from now on, with their
    :obj:`BLOCK_E` (where they take one) and whether they write or read
    the backward's record (the one-head kernels' :obj:`WRITE_RECORD`,
    :obj:`READ_RECORD`)."""
    from torch_geometric_gate.ops.triton import kernels

    launched = []
    for name, kernel in kernels().items():

        def run(*args, _name=name, _run=kernel.run, _fn=kernel.fn, **kw):
            names = list(inspect.signature(_fn).parameters)
            block = args[names.index('BLOCK_E')] if 'BLOCK_E' in names else 0
            record = any(
                args[names.index(flag)]
                for flag in ('WRITE_RECORD', 'READ_RECORD')
                if flag in names
            )
            launched.append((_name, block, record))
            return _run(*args, **kw)

        monkeypatch.setattr(kernel, 'run', run)
    return launched


def _public_step(heads, channels, edge_dim, dropout, options, layer=False):
    r"""Outputs, weights and every gradient of :func:`gate_attention` (or
    of a :class:`GATEConv` step) under :obj:`attention_kernel('triton',
    **options)`."""
    from torch_geometric_gate import GATEConv
    from torch_geometric_gate.ops import attention_kernel, gate_attention

    graph, inputs = make_case(heads, channels, edge_dim)
    torch.manual_seed(5)
    with attention_kernel('triton', **options):
        if layer:
            torch.manual_seed(0)
            conv = GATEConv(
                heads * channels,
                channels,
                heads=heads,
                edge_dim=edge_dim,
                dropout=dropout,
            ).to(DEVICE)
            x = inputs['q_src'].detach().reshape(graph.num_src, -1)
            x.requires_grad_()
            num_input = graph.src.numel() - graph.num_loops
            ei = torch.stack([graph.src, graph.dst])[:, :num_input]
            attr = inputs['edge_attr']
            attr = None if attr is None else attr[:num_input].detach()
            torch.manual_seed(5)
            out, (_, alpha) = conv(x, ei, attr, return_attention_weights=True)
            leaves = [x, *conv.parameters()]
        else:
            out, alpha = gate_attention(
                inputs['q_src'], inputs['q_dst'], inputs['value'],
                torch.stack([graph.src, graph.dst]), inputs['att_neighbor'],
                inputs['att_self'], edge_attr=inputs['edge_attr'],
                weight_edge=inputs['weight_edge'], negative_slope=0.1,
                dropout_p=dropout, need_weights=True, loop=graph.loop,
                masked=graph.masked,
            )  # fmt: skip
            leaves = [v for v in inputs.values() if v is not None]
        loss = out.float().square().sum() + alpha.float().sin().sum()
        grads = torch.autograd.grad(loss, leaves)
    return [out, alpha, *grads]


@pytest.mark.parametrize('variant', list(OPTIONS))
@pytest.mark.parametrize(
    'heads, channels, edge_dim, dropout', [(1, 4, None, 0.0), (2, 3, 2, 0.3)]
)
def test_options_run_their_kernels_and_match_the_default(
    variant, heads, channels, edge_dim, dropout, monkeypatch
):
    options, ran, not_ran = OPTIONS[variant]
    if heads != 1 and variant.startswith('one-head'):  # One head only:
        ran, not_ran = not_ran, ran
    want = _public_step(heads, channels, edge_dim, dropout, {})
    launched = _launched(monkeypatch)
    got = _public_step(heads, channels, edge_dim, dropout, options)
    names = {name for name, *_ in launched}
    assert ran <= names and not (not_ran & names), names
    if variant == 'tiles':  # At most 16 float32 per [BLOCK_E, H, C] tile:
        h_pad, c_pad = launch._pow2(heads), launch._pow2(channels)
        blocks = {b for name, b, _ in launched if name != 'gate_alpha_kernel'}
        assert max(blocks) <= max(1, 16 // (h_pad * c_pad))
    for a, b in zip(got, want):
        assert_close(a, b, atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize('variant', ['one-head', 'record'])
def test_options_reach_the_kernels_from_the_layer(variant, monkeypatch):
    options, ran, _ = OPTIONS[variant]
    want = _public_step(1, 4, 2, 0.0, {}, layer=True)
    launched = _launched(monkeypatch)
    got = _public_step(1, 4, 2, 0.0, options, layer=True)
    assert ran <= {name for name, *_ in launched}
    for a, b in zip(got, want):
        assert_close(a, b, atol=ATOL, rtol=RTOL)


@pytest.mark.slow
def test_options_reach_the_compiled_kernels(monkeypatch):
    # Under torch.compile the custom operators carry the options (forward
    # and backward) and run the variants: the eager results.
    from torch_geometric_gate.ops import attention_kernel, gate_attention

    graph, inputs = make_case(1, 4, 2)
    leaves = [v for v in inputs.values() if v is not None]

    def step(q_src, q_dst, value, edge_attr, weight_edge, a_s, a_t):
        out, alpha = gate_attention(
            q_src, q_dst, value, torch.stack([graph.src, graph.dst]), a_s,
            a_t, edge_attr=edge_attr, weight_edge=weight_edge,
            negative_slope=0.1, need_weights=True, loop=graph.loop,
            masked=graph.masked,
        )  # fmt: skip
        return out.square().sum() + alpha.sin().sum()

    options = dict(triton_one_head_layout=True, triton_backward_record=True)
    torch._dynamo.reset()
    with attention_kernel('triton', **options):
        want = torch.autograd.grad(step(*leaves), leaves)
        compiled = torch.compile(step, fullgraph=True)
        compiled(*leaves)  # Compiles.
        launched = _launched(monkeypatch)
        got = torch.autograd.grad(compiled(*leaves), leaves)
    names = {name for name, *_ in launched}
    one_head = {'gate_fwd_1h_kernel', 'gate_bwd_dst_1h_kernel',
                'gate_bwd_src_1h_kernel'}  # fmt: skip
    assert one_head <= names
    assert not {'gate_fwd_kernel', 'gate_bwd_src_kernel'} & names
    # The backward's passes with the record:
    assert {(name, True) for name, _, record in launched if record} == {
        ('gate_bwd_dst_1h_kernel', True), ('gate_bwd_src_1h_kernel', True)
    }  # fmt: skip
    for a, b in zip(got, want):
        assert_close(a, b, atol=ATOL, rtol=RTOL)
