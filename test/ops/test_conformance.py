r"""One contract for every attention kernel: the public functional op
:func:`~torch_geometric_gate.ops.gate_attention` on each kernel (the
reference, the chunked ATen loops, the compiled CPU loops, Triton under
its interpreter on CPU and natively on CUDA, where present) against a
dense float64 computation: outputs and every gradient, GATE and GATv2
scoring, the graph forms, dtypes, dropout, edge cases and errors."""

from typing import Dict, Optional

import numpy as np
import pytest
import torch
from torch import Tensor
from torch_geometric import EdgeIndex
from torch_geometric.testing import withCUDA

from torch_geometric_gate.ops import attention_kernel, gate_attention

KERNELS = {  # name: the switch's options
    'reference': dict(name='reference'),
    'chunked-aten': dict(name='chunked', eager_loops=False),
    'chunked-loops': dict(name='chunked', eager_loops=True),
    'triton': dict(name='triton'),
    # The Triton kernels' variants, options of the switch:
    'triton-one-head': dict(
        name='triton',
        triton_one_head_layout=True,
        triton_one_head_nodes=2,
        triton_warps=1,
    ),
    'triton-record': dict(
        name='triton', triton_backward_record=True, triton_warps=2
    ),
    'triton-tiles': dict(
        name='triton', triton_forward_tile=16, triton_backward_tile=16
    ),
}
NAMES = ('query_src', 'query_dst', 'value', 'edge_attr', 'weight_edge',
         'att_src', 'att_self')  # fmt: skip


def dtype_of(kernel: str) -> torch.dtype:
    r"""What a kernel's test computes in: Triton float32, the others
    float64."""
    return torch.float32 if kernel.startswith('triton') else torch.double


def skip_unless_runs(kernel: str, device: torch.device):
    if kernel == 'chunked-loops' and device.type != 'cpu':
        pytest.skip('The compiled loops are the CPU kernels')
    if kernel.startswith('triton'):
        pytest.importorskip('triton')


def make_graph(bipartite: bool):
    r"""Node 0 is a hub; node 3's only edge (a self-loop) is masked; the
    last target nodes have no edge; self-loops are scored with
    :math:`a_t`. Sorted by target (a valid column-sorted EdgeIndex)."""
    src = torch.tensor([1, 2, 3, 4, 0, 0, 1, 4, 2, 1, 3])
    dst = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 3])
    masked = torch.zeros(src.numel(), dtype=torch.bool)
    masked[10] = True
    num_src, num_dst = (6, 5) if bipartite else (6, 6)
    return src, dst, masked, num_src, num_dst


def make_inputs(graph, heads, channels, edge_dim, gatv2, device, dtype):
    src, _, _, num_src, num_dst = graph
    gen = torch.Generator().manual_seed(0)

    def rand(*shape):
        t = torch.randn(*shape, generator=gen, dtype=torch.double)
        return t.to(device, dtype).requires_grad_()

    return {
        'query_src': rand(num_src, heads, channels),
        'query_dst': rand(num_dst, heads, channels),
        'value': rand(num_src, heads, channels),
        'edge_attr': rand(src.numel(), edge_dim) if edge_dim else None,
        'weight_edge': rand(heads * channels, edge_dim) if edge_dim else None,
        'att_src': rand(heads, channels),
        'att_self': None if gatv2 else rand(heads, channels),
    }


def dense(
    graph,
    inputs: Dict[str, Optional[Tensor]],
    slope: float,
    loop: Optional[Tensor] = None,
):
    r"""The attention with a dense :obj:`[N_dst, E]` incidence matrix and
    :func:`torch.softmax`, in float64 on the CPU (no gather, no scatter);
    :obj:`att_self` scores the edges :obj:`loop` (default: the self-loops)."""
    i = {
        k: None if v is None else v.detach().cpu().double().requires_grad_()
        for k, v in inputs.items()
    }
    src, dst, masked, _, num_dst = graph
    z = i['query_src'][src] + i['query_dst'][dst]
    if i['edge_attr'] is not None:
        z = z + (i['edge_attr'] @ i['weight_edge'].t()).view_as(z)
    act = torch.where(z > 0, z, slope * z)
    att_self = i['att_self'] if i['att_self'] is not None else i['att_src']
    loop = src == dst if loop is None else loop
    att = torch.where(loop[:, None, None], att_self, i['att_src'])
    score = (act * att).sum(-1)  # [E, H]
    member = dst[None, :] == torch.arange(num_dst)[:, None]  # [N, E]
    kept = member & ~masked[None, :]
    scores = torch.where(kept[..., None], score[None], float('-inf'))
    alpha = torch.softmax(scores, dim=1).nan_to_num(0.0).sum(0)  # [E, H]
    out = torch.einsum(
        'ne,ehc->nhc', member.double(), alpha[..., None] * i['value'][src]
    )
    return (out, alpha), i


def run(kernel, graph, inputs, slope=0.0, dropout_p=0.0, form='plain',
        **kwargs):  # fmt: skip
    src, dst, masked, _, num_dst = graph
    device = inputs['value'].device
    edge_index = torch.stack([src, dst]).to(device)
    if form == 'EdgeIndex':
        edge_index = EdgeIndex(
            edge_index, sparse_size=(graph[3], num_dst), sort_order='col'
        )
    with attention_kernel(**KERNELS[kernel]):
        return gate_attention(
            inputs['query_src'], inputs['query_dst'], inputs['value'],
            edge_index, inputs['att_src'], inputs['att_self'],
            edge_attr=inputs['edge_attr'], weight_edge=inputs['weight_edge'],
            negative_slope=slope, dropout_p=dropout_p, need_weights=True,
            **{'masked': masked.to(device), **kwargs},
        )  # fmt: skip


def assert_close_to_dense(got, want, atol, rtol=1e-4):
    # The kernel's outputs against the dense float64 computation's:
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu().double(), w, atol=atol, rtol=rtol)


def gradients(outputs, inputs):
    gen = torch.Generator().manual_seed(1)
    grads = [
        torch.randn(o.shape, generator=gen, dtype=torch.double).to(o)
        for o in outputs
    ]
    names = [k for k in NAMES if inputs[k] is not None]
    got = torch.autograd.grad(outputs, [inputs[k] for k in names], grads)
    return dict(zip(names, got))


CASES = [  # heads, channels, edge_dim, slope, bipartite, gatv2, form
    (2, 3, None, 0.0, False, False, 'plain'),
    (2, 2, 3, 0.2, True, False, 'EdgeIndex'),
    (1, 4, None, 0.1, False, True, 'plain'),
]


@withCUDA
@pytest.mark.parametrize('kernel', KERNELS)
@pytest.mark.parametrize('case', CASES, ids=['gate', 'edges-bip', 'gatv2'])
def test_outputs_and_gradients_equal_dense(kernel, case, device):
    skip_unless_runs(kernel, device)
    heads, channels, edge_dim, slope, bipartite, gatv2, form = case
    dtype = dtype_of(kernel)
    atol = 1e-4 if dtype == torch.float32 else 1e-10
    graph = make_graph(bipartite)
    inputs = make_inputs(graph, heads, channels, edge_dim, gatv2, device,
                         dtype)  # fmt: skip
    out, alpha = run(kernel, graph, inputs, slope, form=form)
    (want_out, want_alpha), want_inputs = dense(graph, inputs, slope)
    assert out.dtype == alpha.dtype == dtype
    assert_close_to_dense((out, alpha), (want_out, want_alpha), atol)
    got = gradients((out, alpha), inputs)
    want = gradients((want_out, want_alpha), want_inputs)
    assert got.keys() == want.keys()
    for name in want:
        torch.testing.assert_close(
            got[name].cpu().double(),
            want[name],
            atol=atol * 10,
            rtol=1e-3,
            msg=name,
        )


@withCUDA
@pytest.mark.parametrize('kernel', KERNELS)
@pytest.mark.parametrize('flags', ['loop', 'mask_loops_before'])
def test_loop_flags_and_masked_input_loops_equal_dense(kernel, flags, device):
    # The self-loops appended after the graph's own edges, as GATEConv
    # appends them: with 'mask_loops_before' the graph's own self-loops
    # (edges 4, 6, 8 and the masked 10) leave the softmax; with 'loop' the
    # flags given, not the self-loops, pick the edges scored with att_self.
    skip_unless_runs(kernel, device)
    dtype = dtype_of(kernel)
    atol = 1e-4 if dtype == torch.float32 else 1e-10
    src, dst, masked, num_src, num_dst = make_graph(False)
    num_input = src.numel()
    nodes = torch.arange(num_dst)
    src, dst = torch.cat([src, nodes]), torch.cat([dst, nodes])
    masked = torch.cat([masked, torch.zeros(num_dst, dtype=torch.bool)])
    loop = torch.arange(src.numel()) % 3 == 0
    graph = (src, dst, masked, num_src, num_dst)
    inputs = make_inputs(graph, 2, 3, 2, False, device, dtype)
    if flags == 'loop':
        out, alpha = run(kernel, graph, inputs, 0.1, loop=loop.to(device))
        want, want_inputs = dense(graph, inputs, 0.1, loop=loop)
    else:
        out, alpha = run(kernel, graph, inputs, 0.1, masked=None,
                         mask_loops_before=num_input)  # fmt: skip
        input_loop = (src == dst) & (torch.arange(src.numel()) < num_input)
        assert input_loop.sum() == 4
        want, want_inputs = dense(
            (src, dst, input_loop, num_src, num_dst), inputs, 0.1
        )
    assert_close_to_dense((out, alpha), want, atol)
    got = gradients((out, alpha), inputs)
    want = gradients(want, want_inputs)
    for name in want:
        torch.testing.assert_close(got[name].cpu().double(), want[name],
                                   atol=atol * 10, rtol=1e-3,
                                   msg=name)  # fmt: skip


@pytest.mark.parametrize('kernel', ['reference', 'chunked-aten'])
def test_bipartite_loop_flags_as_the_docs_say(kernel):
    # Source i and target i of a bipartite graph: by default an edge (i, i)
    # is scored with att_self; GATEConv without add_self_loops scores it
    # with att_src, which loop=False gives (as the docstring says).
    from torch_geometric_gate import GATEConv

    torch.manual_seed(0)
    conv = GATEConv((5, 3), 4, heads=2, add_self_loops=False)
    torch.nn.init.normal_(conv.att_self)
    torch.nn.init.normal_(conv.att_neighbor)
    x_src, x_dst = torch.randn(6, 5), torch.randn(3, 3)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5, 1], [0, 1, 0, 1, 2, 2, 2]])
    q_src = conv.lin_src(x_src).view(6, 2, 4)
    q_dst = conv.lin_dst(x_dst).view(3, 2, 4)
    value = conv.lin(x_src).view(6, 2, 4)
    args = (q_src, q_dst, value, edge_index, conv.att_neighbor,
            conv.att_self)  # fmt: skip
    with attention_kernel(**KERNELS[kernel]):
        want = conv((x_src, x_dst), edge_index)
        by_index, _ = gate_attention(*args)
        none, _ = gate_attention(*args, loop=torch.zeros(7, dtype=torch.bool))
    torch.testing.assert_close(none.reshape(3, 8) + conv.bias, want)
    assert not torch.allclose(by_index.reshape(3, 8) + conv.bias, want)
    with attention_kernel(**KERNELS[kernel]):
        flagged, _ = gate_attention(
            *args, loop=edge_index[0] == edge_index[1]
        )  # fmt: skip
    torch.testing.assert_close(by_index, flagged)


@withCUDA
@pytest.mark.parametrize('kernel', KERNELS)
def test_one_tensor_in_every_role_has_the_gradients_of_all_its_roles(
    kernel, device
):
    # gate_attention(q, q, q, ..., a, a): the projections of shared weights
    # and GATv2's one vector. First- and second-order gradients of each
    # tensor are the sums over its roles, as the float64 reference's
    # (Triton's double backward counted each role's whole sum in every
    # role: 2-3x).
    skip_unless_runs(kernel, device)
    dtype = dtype_of(kernel)
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(6, 2, 3, generator=gen, dtype=torch.double)
    a = torch.randn(2, 3, generator=gen, dtype=torch.double)
    src, dst, masked, _, _ = make_graph(False)
    edge_index = torch.stack([src, dst])

    def penalty(name, q, a):
        q, a = q.requires_grad_(), a.requires_grad_()
        with attention_kernel(**KERNELS[name]):
            out, alpha = gate_attention(
                q, q, q, edge_index.to(q.device), a, a, negative_slope=0.2,
                need_weights=True, masked=masked.to(q.device),
            )  # fmt: skip
        loss = out.square().sum() + alpha.square().sum()
        first = torch.autograd.grad(loss, [q, a], create_graph=True)
        total = sum(g.square().sum() for g in first)
        return [*first, *torch.autograd.grad(total, [q, a])]

    got = penalty(kernel, q.to(device, dtype), a.to(device, dtype))
    want = penalty('reference', q.clone(), a.clone())
    atol = 1e-3 if dtype == torch.float32 else 1e-10
    for what, g, w in zip(['dq', 'da', 'ddq', 'dda'], got, want):
        torch.testing.assert_close(g.cpu().double(), w, atol=atol,
                                   rtol=1e-3, msg=what)  # fmt: skip


@withCUDA
@pytest.mark.parametrize('kernel', KERNELS)
@pytest.mark.parametrize('through_views', [False, True])
def test_leaves_gradients_hold_no_more_than_themselves(
    kernel, device, through_views
):
    # They become .grad, kept until the next zero_grad: as views of the
    # Triton backward's one buffer they kept all of it (the other
    # gradients, partial sums, the edge projection's). Also for
    # projections that are views of leaves (an embedding table's weight
    # viewed as [N, H, C]), whose view hands its leaf a view of its
    # gradient.
    skip_unless_runs(kernel, device)
    dtype = dtype_of(kernel)
    graph = make_graph(False)
    inputs = make_inputs(graph, 2, 3, 2, False, device, dtype)
    names = ('query_src', 'query_dst', 'value', 'att_src', 'att_self')
    leaves = {name: inputs[name] for name in names}
    if through_views:
        for name in ('query_src', 'query_dst', 'value'):
            leaves[name] = inputs[name].detach().flatten(1).requires_grad_()
            inputs[name] = leaves[name].view_as(inputs[name])
    out, alpha = run(kernel, graph, inputs)
    (out.sum() + alpha.sum()).backward()
    for name, leaf in leaves.items():
        grad = leaf.grad
        assert grad.untyped_storage().nbytes() == grad.nbytes, name


@withCUDA
@pytest.mark.parametrize('kernel', KERNELS)
def test_dropout_is_seeded_and_the_output_uses_the_kept_weights(
    kernel, device
):
    skip_unless_runs(kernel, device)
    dtype = dtype_of(kernel)
    graph = make_graph(False)
    inputs = make_inputs(graph, 2, 3, None, False, device, dtype)
    torch.manual_seed(7)
    out, alpha = run(kernel, graph, inputs, dropout_p=0.5)
    torch.manual_seed(7)
    out2, alpha2 = run(kernel, graph, inputs, dropout_p=0.5)
    assert torch.equal(out, out2) and torch.equal(alpha, alpha2)
    _, plain = run(kernel, graph, inputs)
    dropped = (alpha == 0) & (plain != 0)
    assert dropped.any() and (~dropped & (plain != 0)).any()
    kept = plain != 0
    torch.testing.assert_close(alpha[kept & ~dropped],
                               2 * plain[kept & ~dropped])  # fmt: skip
    # The output aggregates the weights returned (the same mask):
    src, dst, *_ = graph
    want = torch.zeros_like(out).index_add_(
        0, dst.to(device), alpha[..., None] * inputs['value'][src.to(device)]
    )
    torch.testing.assert_close(out, want)


@withCUDA
@pytest.mark.parametrize('kernel', KERNELS)
def test_low_precision_keeps_its_dtype(kernel, device):
    skip_unless_runs(kernel, device)
    graph = make_graph(False)
    inputs = make_inputs(graph, 2, 4, None, False, device, torch.bfloat16)
    out, alpha = run(kernel, graph, inputs)
    (want_out, want_alpha), _ = dense(graph, inputs, 0.0)
    assert out.dtype == alpha.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu().double(), want_out, atol=3e-2,
                               rtol=3e-2)  # fmt: skip
    out.float().sum().backward()
    assert inputs['att_src'].grad.dtype == torch.bfloat16


@withCUDA
@pytest.mark.parametrize('kernel', KERNELS)
def test_edge_features_narrower_than_the_scores_keep_one_dtype(kernel, device):
    # Edge features no wider than the queries and vectors (the ones taken:
    # wider ones are refused, the kernels scored in the narrower dtype
    # where the reference promoted) give the reference's dtypes.
    skip_unless_runs(kernel, device)
    graph = make_graph(False)
    inputs = make_inputs(graph, 2, 4, 3, False, device, torch.bfloat16)
    for name in ('att_src', 'att_self'):  # float32 scores
        inputs[name] = inputs[name].detach().float().requires_grad_()
    out, alpha = run(kernel, graph, inputs)
    want_out, want_alpha = run('reference', graph, inputs)
    assert (out.dtype, alpha.dtype) == (want_out.dtype, want_alpha.dtype)
    torch.testing.assert_close(out, want_out, atol=3e-2, rtol=3e-2)


@withCUDA
@pytest.mark.parametrize('kernel', KERNELS)
@pytest.mark.parametrize('heads', [2, 17])  # (17: per head, not by block)
def test_attention_vectors_narrower_than_the_projections(
    kernel, heads, device
):
    # Float64 projections scored with float32 attention vectors (float32
    # with bfloat16 on Triton) compute in the wider dtype, as the reference
    # promotes: the chunked ATen loops (on CPU from five threads under
    # 'auto'), the compiled loops' and Triton's double backward multiplied
    # the two and failed ("expected m1 and m2 to have the same dtype").
    skip_unless_runs(kernel, device)
    wide = dtype_of(kernel)
    narrow = torch.bfloat16 if wide == torch.float32 else torch.float32
    graph = make_graph(False)
    inputs = make_inputs(graph, heads, 3, 2, False, device, wide)
    for name in ('att_src', 'att_self'):
        inputs[name] = inputs[name].detach().to(narrow).requires_grad_()
    out, alpha = run(kernel, graph, inputs, 0.2)
    (want_out, want_alpha), want_inputs = dense(graph, inputs, 0.2)
    assert out.dtype == alpha.dtype == wide
    atol = 1e-4 if wide == torch.float32 else 1e-10
    assert_close_to_dense((out, alpha), (want_out, want_alpha), atol)
    got = gradients((out, alpha), inputs)
    want = gradients((want_out, want_alpha), want_inputs)
    for name in want:
        assert got[name].dtype == inputs[name].dtype, name
        # (The vectors' gradients are rounded to their dtype:)
        tol = 1e-2 if got[name].dtype != wide else atol * 10
        torch.testing.assert_close(got[name].cpu().double(), want[name],
                                   atol=tol, rtol=tol, msg=name)  # fmt: skip
    # Double backward, against the float64 reference (the dense softmax's
    # second order is NaN at its -inf): a gradient penalty's gradients.
    names = [k for k in NAMES if inputs[k] is not None]

    def second(kernel, inputs):
        out, alpha = run(kernel, graph, inputs, 0.2)
        loss = out.square().sum() + alpha.square().sum()
        leaves = [inputs[k] for k in names]
        first = torch.autograd.grad(loss, leaves, create_graph=True)
        total = sum(g.double().square().sum() for g in first)
        return torch.autograd.grad(total, leaves)

    got = second(kernel, inputs)
    want = second('reference', {
        k: None if v is None else v.detach().cpu().double().requires_grad_()
        for k, v in inputs.items()
    })  # fmt: skip
    for name, g, w in zip(names, got, want):
        assert g.dtype == inputs[name].dtype, name
        # (Of the squares of the vectors' gradients, rounded to their dtype:)
        tol = 5e-2 if narrow == torch.bfloat16 else 1e-5
        torch.testing.assert_close(g.cpu().double(), w, atol=tol, rtol=tol,
                                   msg=f'second order, {name}')  # fmt: skip


@withCUDA
@pytest.mark.parametrize('kernel', KERNELS)
def test_edge_cases(kernel, device):
    skip_unless_runs(kernel, device)
    dtype = dtype_of(kernel)
    options = KERNELS[kernel]
    q = torch.randn(3, 1, 2, dtype=dtype, device=device)
    a = torch.randn(1, 2, dtype=dtype, device=device)
    no_edges = torch.empty(2, 0, dtype=torch.long, device=device)
    with attention_kernel(**options):
        # No edge: a zero output and no weight.
        out, alpha = gate_attention(q, q, q, no_edges, a, a,
                                    need_weights=True)  # fmt: skip
        assert out.shape == (3, 1, 2) and bool((out == 0).all())
        assert alpha.shape == (0, 1)
        # Every edge of node 1 masked: its output is zero, not NaN.
        edge_index = torch.tensor([[0, 2], [1, 0]], device=device)
        masked = torch.tensor([True, False], device=device)
        out, alpha = gate_attention(
            q, q, q, edge_index, a, None, masked=masked, need_weights=True
        )
        assert bool((out[1] == 0).all()) and bool(out.isfinite().all())
        assert alpha[0].item() == 0 and alpha[1].item() == 1
        # A CSR graph (rowptr over the targets) is the edge list it holds:
        rowptr = torch.tensor([0, 1, 2, 2], device=device)
        csr_out, _ = gate_attention(q, q, q, (rowptr, edge_index[0].flip(0)),
                                    a, a)  # fmt: skip
        plain_out, _ = gate_attention(q, q, q, edge_index.flip(1), a, a)
        torch.testing.assert_close(csr_out, plain_out)
        # Without need_weights no weights come back:
        assert gate_attention(q, q, q, edge_index, a, a)[1] is None


@pytest.mark.parametrize(
    'kwargs,match',
    [
        (dict(edge_index=torch.zeros(3, 2, dtype=torch.long)),
         r"'edge_index' of integers of shape \[2, num_edges\]"),
        (dict(edge_index=torch.zeros(2, 2)), "'edge_index' of integers"),
        (dict(att_src=torch.zeros(3, 2)), r"'att_src' of shape \[1, 2\]"),
        (dict(att_self=torch.zeros(1, 3)), r"'att_self' of shape"),
        (dict(value=torch.zeros(4, 1, 2)), "a row per source node"),
        (dict(query_dst=torch.zeros(3, 2)), "'query_dst' of shape"),
        # (No channel failed on Triton with a ZeroDivisionError, no head on
        # the chunked ATen loops in a reshape.)
        (dict(query_src=torch.zeros(3, 1, 0), query_dst=torch.zeros(3, 1, 0),
              value=torch.zeros(3, 1, 0), att_src=torch.zeros(1, 0)),
         r"'query_src' of shape \[num_nodes, heads, channels\] with heads, "
         r'channels > 0 \(got \[3, 1, 0\]\)'),
        (dict(query_src=torch.zeros(3, 0, 2), query_dst=torch.zeros(3, 0, 2),
              value=torch.zeros(3, 0, 2), att_src=torch.zeros(0, 2)),
         r'with heads, channels > 0 \(got \[3, 0, 2\]\)'),
        (dict(negative_slope=-0.1), "non-negative 'negative_slope'"),
        (dict(dropout_p=1.5), r"'dropout_p' in \[0, 1\]"),
        (dict(edge_attr=torch.zeros(2, 3)), "'edge_attr' and 'weight_edge'"),
        (dict(masked=torch.zeros(3, dtype=torch.bool)),
         r"'masked' of booleans of shape \[2\]"),
        (dict(loop=torch.zeros(2)), "'loop' of booleans"),
        (dict(edge_index=(torch.tensor([0, 2]), torch.tensor([0, 1]))),
         r"CSR 'rowptr' of 4 integers"),
        # (A float rowptr failed inside repeat_interleave; a nested list,
        # read as a CSR pair, on .dim(); an array on .dim() too.)
        (dict(edge_index=(torch.tensor([0, 1, 2, 2.0]), torch.tensor([0, 1]))),
         r"CSR 'rowptr' of 4 integers .* got torch.float32"),
        (dict(edge_index=[[0, 1], [1, 2]]),
         r"pair of tensors \(rowptr, src\) \(got a list of list, list"),
        (dict(edge_index=np.array([[0, 1], [1, 2]])),
         r"a \[2, num_edges\] tensor, an EdgeIndex .* \(got ndarray\)"),
        (dict(edge_index=(torch.tensor([0, 1, 2, 2]), torch.zeros(2))),
         r"CSR 'src' of integers"),
        (dict(query_src=torch.zeros(3, 1, 3)),
         "'query_src', 'query_dst' and 'value' with the same heads and "
         'channels'),
        (dict(query_dst=torch.zeros(3, 2, 2)), 'the same heads'),
        (dict(negative_slope=float('nan')), "finite non-negative"),
        # (Python's own TypeError of a comparison, naming neither:)
        (dict(negative_slope='0.2'), "finite non-negative 'negative_slope' "
         r"\(got '0.2'\)"),
        (dict(dropout_p=None), r"'dropout_p' in \[0, 1\] \(got None\)"),
        (dict(edge_attr=torch.zeros(2, 3), weight_edge=torch.zeros(2, 2)),
         r"'weight_edge' of shape \[2, 3\]"),
        (dict(edge_attr=torch.zeros(2), weight_edge=torch.zeros(2, 1)),
         r"'edge_attr' of shape \[2, edge_dim\]"),
        # (Integer features ran on the chunked kernels, promoted, and failed
        # in the reference's leaky_relu; integer vectors ran everywhere;
        # the edge tensors' dtypes failed in a product of 'm1 and m2'.)
        (dict(value=torch.ones(3, 1, 2, dtype=torch.long)),
         r"'value' of a floating-point dtype \(got torch.int64\)"),
        (dict(att_src=torch.ones(1, 2, dtype=torch.int32)),
         r"'att_src' of a floating-point dtype \(got torch.int32\)"),
        (dict(edge_attr=torch.zeros(2, 3, dtype=torch.long),
              weight_edge=torch.zeros(2, 3)),
         r"'edge_attr' of a floating-point dtype"),
        (dict(edge_attr=torch.zeros(2, 3, dtype=torch.double),
              weight_edge=torch.zeros(2, 3)),
         r"'edge_attr' and 'weight_edge' of the same dtype \(got "
         r'torch.float64 and torch.float32\)'),
        # (Likewise for the edge features: the kernels scored in the
        # queries' and vectors' dtype, the reference in the edges' wider.)
        (dict(edge_attr=torch.zeros(2, 3, dtype=torch.double),
              weight_edge=torch.zeros(2, 3, dtype=torch.double)),
         r"'edge_attr' and 'weight_edge' of a dtype no wider than the "
         r"scores' \(torch.float32, .*\), got torch.float64"),
        (dict(query_src=torch.zeros(3, 1, 2, dtype=torch.bfloat16),
              query_dst=torch.zeros(3, 1, 2, dtype=torch.bfloat16),
              value=torch.zeros(3, 1, 2, dtype=torch.bfloat16),
              att_src=torch.zeros(1, 2, dtype=torch.bfloat16),
              edge_attr=torch.zeros(2, 3, dtype=torch.half),
              weight_edge=torch.zeros(2, 3, dtype=torch.half)),
         r"scores' \(torch.bfloat16, .*\), got torch.float16"),
        # (The kernels computed in 'query_src''s dtype, the reference in the
        # wider: a bfloat16 or a float32 result, by kernel.)
        (dict(query_dst=torch.zeros(3, 1, 2, dtype=torch.double)),
         r"'query_src' and 'query_dst' of the same dtype \(got "
         r'torch.float32 and torch.float64\)'),
        # (A float masked the loops below it, rounded up; a bool as 0 or 1.)
        (dict(mask_loops_before=1.5),
         r"'mask_loops_before' an int in \[0, 2\] \(got 1.5\)"),
        (dict(mask_loops_before=True),
         r"'mask_loops_before' an int in \[0, 2\] \(got True\)"),
        (dict(mask_loops_before=3), r"'mask_loops_before' an int in \[0, 2\]"),
        # (Taken whatever node counts it knew, as GATEConv took it.)
        (dict(edge_index=EdgeIndex([[0, 1], [1, 2]], sparse_size=(4, 4))),
         r"EdgeIndex 'edge_index' of sparse size \(3, 3\), the rows of "
         r"'query_src' and 'query_dst' \(got \(4, 4\)\)"),
        (dict(edge_index=EdgeIndex([[0, 1], [1, 2]], sparse_size=(None, 4))),
         r'of sparse size \(3, 3\), .* \(got \(None, 4\)\)'),
    ],
)  # fmt: skip
def test_bad_input_is_refused_naming_the_problem(kwargs, match):
    q = torch.randn(3, 1, 2)
    args = dict(query_src=q, query_dst=q, value=q,
                edge_index=torch.tensor([[0, 1], [1, 2]]),
                att_src=torch.zeros(1, 2), att_self=None)  # fmt: skip
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        gate_attention(**args)
    if isinstance(args['edge_index'], EdgeIndex):  # Known sizes that match:
        args['edge_index'] = EdgeIndex(args['edge_index'].as_tensor(),
                                       sparse_size=(3, None))  # fmt: skip
        gate_attention(**args)


@pytest.mark.parametrize('kernel', KERNELS)
@pytest.mark.parametrize('name', ['masked', 'loop', 'edge_attr', 'att_self',
                                  'edge_index'])  # fmt: skip
def test_a_tensor_on_another_device_is_refused_on_every_kernel(kernel, name):
    # (The chunked kernels ignored a 'masked' or 'edge_attr' on the meta
    # device, or read garbage for it, and returned a CPU result.)
    skip_unless_runs(kernel, torch.device('cpu'))
    q, a = torch.randn(3, 1, 2), torch.randn(1, 2)
    args = dict(
        edge_index=torch.tensor([[0, 1, 2], [1, 1, 2]]), att_self=a,
        masked=torch.tensor([True, False, False]),
        loop=torch.tensor([False, False, True]),
        edge_attr=torch.randn(3, 4), weight_edge=torch.randn(2, 4),
    )  # fmt: skip
    args[name] = args[name].to('meta')
    match = f"Expected '{name}' on the device of 'query_src' \\(cpu\\)"
    with attention_kernel(**KERNELS[kernel]):
        with pytest.raises(ValueError, match=match + ', got meta'):
            gate_attention(q, q, q, att_src=a, **args)


@pytest.mark.parametrize('kernel', KERNELS)
@pytest.mark.parametrize(
    'edge_index,match',
    [
        (torch.tensor([[0, 1], [1, -1]]), r'row 1 \(targets\) in \[0, 3\)'),
        (torch.tensor([[0, 4], [1, 2]]), r'row 0 \(sources\) in \[0, 4\)'),
        (torch.tensor([[0, 1], [1, 3]]), 'out of range'),
        ((torch.tensor([0, 1, 2, 2]), torch.tensor([0, 4])),
         "CSR 'src' holds node indices out of range"),
        ((torch.tensor([0, 2, 1, 2]), torch.tensor([0, 1])),
         r"'rowptr' that starts at 0, ends at the number of edges \(2\)"),
        ((torch.tensor([0, 1, 1, 1]), torch.tensor([0, 1])), "'rowptr'"),
    ],
)  # fmt: skip
def test_node_indices_out_of_range_are_refused_on_every_kernel(
    kernel, edge_index, match
):
    # 4 source nodes, 3 targets: checked before any kernel reads them (the
    # chunked kernels wrapped a negative index around; Triton read past
    # the rows).
    skip_unless_runs(kernel, torch.device('cpu'))
    q_src, q_dst = torch.randn(4, 1, 2), torch.randn(3, 1, 2)
    with attention_kernel(**KERNELS[kernel]):
        with pytest.raises(RuntimeError, match=match):
            gate_attention(q_src, q_dst, q_src, edge_index, torch.ones(1, 2))


@pytest.mark.parametrize('kernel', ['reference', 'chunked-loops'])
def test_compiles_fullgraph_equal_to_eager(kernel):
    # Under torch.compile the kernels are custom operators (no graph break);
    # the same outputs and gradients as eagerly.
    graph = make_graph(False)
    inputs = make_inputs(graph, 2, 3, 2, False, torch.device('cpu'),
                         torch.double)  # fmt: skip
    torch._dynamo.reset()
    compiled = torch.compile(run, fullgraph=True, backend='aot_eager')
    try:
        got = compiled(kernel, graph, inputs, 0.2)
    finally:
        torch._dynamo.reset()
    want = run(kernel, graph, inputs, 0.2)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)
    got, want = gradients(got, inputs), gradients(want, inputs)
    for name in want:
        torch.testing.assert_close(got[name], want[name], atol=1e-10,
                                   rtol=1e-8, msg=name)  # fmt: skip
