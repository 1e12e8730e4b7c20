import itertools
from typing import Dict, Tuple

import pytest
import torch
from conv_testing import EDGE_INDEX, NUM_NODES, randomize_attention
from torch import Tensor
from torch_geometric.nn import GATv2Conv

from torch_geometric_gate import GATEConv
from torch_geometric_gate.ops import attention_kernel, chunked, select_kernel
from torch_geometric_gate.ops.chunked import EdgeAggregate, EdgeScore


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
    'heads,add_self_loops,edge_dim,slope,share_weights,bipartite,dropout',
    [
        (1, True, None, 0.0, False, False, 0.0),
        (3, True, None, 0.0, False, False, 0.0),
        (3, False, None, 0.0, False, False, 0.0),
        (2, True, 3, 0.0, False, False, 0.0),
        (2, False, 3, 0.2, False, False, 0.0),
        (2, True, None, 0.2, True, False, 0.0),
        (2, True, None, 0.0, False, True, 0.0),
        (2, True, 3, 0.0, False, False, 0.5),
        (2, False, None, 0.0, False, False, 0.5),
    ],
)
def test_chunked_kernels_equal_reference(
    heads, add_self_loops, edge_dim, slope, share_weights, bipartite, dropout
):
    torch.manual_seed(0)
    kwargs = dict(
        heads=heads,
        add_self_loops=add_self_loops,
        edge_dim=edge_dim,
        negative_slope=slope,
        share_weights=share_weights,
        dropout=dropout,
        residual=True,
    )
    fused = GATEConv(5, 4, **kwargs).double()
    randomize_attention(fused)
    reference = fused
    x = (torch.randn(NUM_NODES, 5, dtype=torch.double),)
    edge_index = EDGE_INDEX
    if bipartite:
        x = x + (torch.randn(4, 5, dtype=torch.double),)
        edge_index = EDGE_INDEX[:, EDGE_INDEX[1] < 4]
    edge_attr = None
    if edge_dim is not None:
        edge_attr = torch.randn(edge_index.size(1), 3, dtype=torch.double)

    assert select_kernel(fused, x[0]) == 'chunked'
    got = step(fused, x, edge_index, edge_attr, seed=7)
    fused.zero_grad()
    expected = step(reference, x, edge_index, edge_attr, 7, 'reference')
    assert torch.allclose(got[0], expected[0], atol=1e-12)
    assert torch.equal(got[1], expected[1])
    assert torch.allclose(got[2], expected[2], atol=1e-12)
    assert got[3].keys() == expected[3].keys()
    for name in got[3]:
        assert torch.allclose(got[3][name], expected[3][name], atol=1e-10), (
            name
        )
    if dropout > 0:  # Dropout did act (and identically in both paths):
        assert (got[2] == 0).any()
    # The test can fail: another seed draws another dropout mask.
    if dropout > 0:
        other = step(fused, x, edge_index, edge_attr, seed=8)
        assert not torch.allclose(other[0], expected[0])


@pytest.mark.parametrize('slope', [0.0, 0.2])
def test_chunked_functions_gradcheck_across_chunks(monkeypatch, slope):
    # Chunks of 3 edges, so that chunk boundaries are crossed:
    monkeypatch.setitem(chunked.CHUNK_ELEMENTS, 'cpu', 3 * 2 * 2)
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
        )

    inputs = (q_src, q_dst, edge_attr, weight, att_s, att_t)
    assert torch.autograd.gradcheck(score, inputs)
    # The backward is differentiable (gradient penalties):
    assert torch.autograd.gradgradcheck(score, inputs)

    # Against the plain formula:
    z = q_src[src] + q_dst[dst] + (edge_attr @ weight.t()).view(-1, 2, 2)
    z = torch.nn.functional.leaky_relu(z, slope)
    att = torch.where(loop.view(-1, 1, 1), att_t, att_s)
    assert torch.allclose(score(*inputs), (z * att).sum(-1))

    alpha = torch.rand(num_edges, heads, **kw)

    def aggregate(q_src, alpha):
        return EdgeAggregate.apply(q_src, alpha, src, dst, 4)

    assert torch.autograd.gradcheck(aggregate, (q_src, alpha))
    assert torch.autograd.gradgradcheck(aggregate, (q_src, alpha))
    expected = torch.zeros(4, heads, channels, dtype=torch.double)
    expected.index_add_(0, dst, q_src[src] * alpha.unsqueeze(-1))
    assert torch.allclose(aggregate(q_src, alpha), expected)


def saved_storages(module, *args) -> Tuple[Dict[int, int], Tensor]:
    r"""The distinct storages (their bytes) saved for backward by one
    forward, and its output.
    """
    storages: Dict[int, int] = {}

    def pack(t: Tensor):
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = module(*args)
    return storages, out


def saved_bytes(module, *args) -> int:
    r"""Bytes of the distinct storages saved for backward by one forward."""
    return sum(saved_storages(module, *args)[0].values())


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


@pytest.mark.parametrize('kernel', ['chunked', 'reference'])
def test_one_overflowing_head_leaves_the_others_finite(kernel):
    torch.manual_seed(0)
    x = torch.rand(NUM_NODES, 4) + 0.5  # positive: U x overflows to +inf
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
