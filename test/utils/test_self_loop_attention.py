import numpy as np
import pytest
import torch
from torch_geometric.testing import withPackage
from torch_geometric.utils import to_torch_sparse_tensor

from torch_geometric_gate.utils import self_loop_attention


def test_self_loop_attention_against_a_loop():
    torch.manual_seed(0)
    edge_index = torch.tensor([[0, 1, 2, 2, 1, 3, 1], [1, 0, 2, 1, 1, 3, 1]])
    alpha = torch.rand(edge_index.size(1), 3)
    expected = torch.zeros(5, 3)
    for (u, v), a in zip(edge_index.t().tolist(), alpha):
        if u == v:  # duplicate loops (masked copies) are summed
            expected[v] += a
    out = self_loop_attention(edge_index, alpha, num_nodes=5)
    assert torch.allclose(out, expected)
    assert self_loop_attention(edge_index, alpha).shape == (4, 3)
    assert torch.allclose(
        self_loop_attention(edge_index, alpha[:, 0]), expected[:4, 0]
    )

    adj = to_torch_sparse_tensor(edge_index.flip(0), alpha, size=(5, 5))
    assert torch.allclose(self_loop_attention(adj), expected)
    jit = torch.jit.script(self_loop_attention)
    assert torch.allclose(jit(edge_index, alpha, 5), expected)


def test_self_loop_attention_errors():
    edge_index = torch.tensor([[0, 1], [1, 1]])
    with pytest.raises(ValueError, match="'alpha' is required"):
        self_loop_attention(edge_index)
    with pytest.raises(ValueError, match='one attention weight row per edge'):
        self_loop_attention(edge_index, torch.rand(3))
    with pytest.raises(ValueError, match=r'shape \[2, num_edges\]'):
        self_loop_attention(edge_index.t().reshape(1, 4), torch.rand(4))
    adj = to_torch_sparse_tensor(edge_index, size=(2, 2))
    with pytest.raises(ValueError, match="'alpha' must be None"):
        self_loop_attention(adj, torch.rand(2))


def test_self_loop_attention_rejects_bad_input():
    edge_index = torch.tensor([[0, 1, 1], [1, 0, 1]])
    alpha = torch.tensor([0.25, 0.5, 0.5])
    with pytest.raises(TypeError, match="'alpha' to be a torch.Tensor"):
        self_loop_attention(edge_index, alpha.numpy())
    with pytest.raises(TypeError, match='floating-point attention'):
        self_loop_attention(edge_index, alpha.long())
    with pytest.raises(ValueError, match=r'\[num_edges, heads\]'):
        self_loop_attention(edge_index, alpha.view(3, 1, 1))
    for dtype in [torch.bool, torch.float]:
        with pytest.raises(TypeError, match='integer dtype'):
            self_loop_attention(edge_index.to(dtype), alpha)
    # A negative index used to wrap around to the last node:
    with pytest.raises(ValueError, match='non-negative.*minimum -1'):
        self_loop_attention(torch.tensor([[0, -1], [1, -1]]), alpha[:2], 2)
    with pytest.raises(ValueError, match=r"'num_nodes' \(1\) is too small"):
        self_loop_attention(edge_index, alpha, 1)
    with pytest.raises(ValueError, match="'num_nodes' must be non-negative"):
        self_loop_attention(edge_index, alpha, -1)
    with pytest.raises(TypeError, match="'num_nodes' must be an int"):
        self_loop_attention(edge_index, alpha, 2.0)
    # Integer types of numpy are ints; int32 indices are fine:
    expected = torch.tensor([0.0, 0.5, 0.0])
    assert torch.equal(self_loop_attention(edge_index, alpha, 3), expected)
    out = self_loop_attention(edge_index.int(), alpha, np.int64(3))
    assert torch.equal(out, expected)
    jit = torch.jit.script(self_loop_attention)
    with pytest.raises(Exception, match=r"'num_nodes' \(1\) is too small"):
        jit(edge_index, alpha, 1)


def test_self_loop_attention_leaves_uncoalesced_input_alone():
    adj = torch.sparse_coo_tensor(
        torch.tensor([[1, 0, 1], [1, 1, 0]]), torch.tensor([0.5, 1.0, 0.5])
    )
    out = self_loop_attention(adj)
    assert torch.equal(out, torch.tensor([0.0, 0.5]))
    assert not adj.is_coalesced()


def test_self_loop_attention_takes_the_attention_pair_whole():
    # Passing the (edge_index, alpha) pair of return_attention_weights=True
    # as one argument said "'alpha' is required with an edge index tensor",
    # then a TypeError asking for self_loop_attention(*attention).
    edge_index = torch.tensor([[0, 1, 0, 1], [1, 0, 0, 1]])
    alpha = torch.tensor([0.25, 0.5, 0.75, 0.5])
    attention = (edge_index, alpha)
    expected = torch.tensor([0.75, 0.5])
    assert torch.equal(self_loop_attention(attention), expected)
    assert torch.equal(self_loop_attention(*attention), expected)
    assert torch.equal(
        self_loop_attention(attention, num_nodes=3)[:2], expected
    )
    with pytest.raises(TypeError, match="got the pair and 'alpha'"):
        self_loop_attention(attention, alpha)
    # A list edge index still gets the tensor message:
    with pytest.raises(TypeError, match='torch.Tensor'):
        self_loop_attention(edge_index.tolist(), alpha)


@pytest.mark.parametrize('layout', [torch.sparse_coo, torch.sparse_csr])
@pytest.mark.parametrize('heads', [1, 2])
def test_self_loop_attention_of_the_sparse_attention_pair(layout, heads):
    # For a torch.sparse adjacency, GATEConv returns the pair (adj, values):
    # self_loop_attention(attention) asked for self_loop_attention(
    # *attention), which raised "'alpha' must be None for a sparse
    # adjacency"; only self_loop_attention(attention[0]) worked.
    from torch_geometric_gate.nn.conv import GATEConv

    torch.manual_seed(0)
    x = torch.randn(6, 4)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5, 1], [1, 2, 3, 4, 5, 0, 3]])
    conv = GATEConv(4, 3, heads=heads)
    # The dense weights of the same layer:
    _, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
    expected = self_loop_attention(ei, alpha, num_nodes=6)
    assert expected.shape == (6, heads)

    adj = to_torch_sparse_tensor(
        edge_index.flip(0), size=(6, 6), layout=layout
    )
    _, attention = conv(x, adj, return_attention_weights=True)
    assert isinstance(attention, tuple) and attention[0].layout == layout
    assert torch.allclose(self_loop_attention(attention), expected)
    assert torch.allclose(self_loop_attention(*attention), expected)
    assert torch.allclose(self_loop_attention(attention[0]), expected)
    # The values may be a copy, but not other weights:
    adj_t, values = attention
    assert torch.allclose(self_loop_attention(adj_t, values.clone()), expected)
    jit = torch.jit.script(self_loop_attention)
    assert torch.allclose(jit(adj_t, values, None), expected)
    for other in (values + 1.0, values[1:], values.view(-1)):
        with pytest.raises(ValueError, match="'alpha' must be None or the"):
            self_loop_attention(adj_t, other)


def test_an_edge_index_s_targets_size_the_result():
    # An EdgeIndex knows its targets: 5 nodes, not the 3 its edges reach.
    from torch_geometric import EdgeIndex

    index = torch.tensor([[0, 1, 2], [0, 1, 2]])
    alpha = torch.ones(3)
    got = self_loop_attention(EdgeIndex(index, sparse_size=(5, 5)), alpha)
    assert torch.equal(got, torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0]))
    # Bipartite, 6 sources and 4 targets: a row per target.
    bipartite = EdgeIndex(torch.tensor([[5, 1], [0, 1]]), sparse_size=(6, 4))
    assert self_loop_attention(bipartite, torch.ones(2)).shape == (4,)
    # Without the size: PyG's inference, the largest index plus one.
    assert self_loop_attention(EdgeIndex(index), alpha).shape == (3,)


@withPackage('torch_sparse')
def test_a_sparse_tensor_without_values_is_refused():  # pragma: no cover
    # The input adjacency, which carries no attention weights, read as a
    # weight of 1 per edge: every node with a loop got alpha_vv = 1.
    from torch_geometric.typing import SparseTensor

    from torch_geometric_gate.nn.conv import GATEConv

    torch.manual_seed(0)
    x = torch.randn(4, 3)
    edge_index = torch.tensor([[0, 1, 2, 3, 2], [1, 2, 3, 0, 2]])
    adj_t = SparseTensor(
        row=edge_index[1], col=edge_index[0], sparse_sizes=(4, 4)
    )
    _, attention = GATEConv(3, 2)(x, adj_t, return_attention_weights=True)
    expected = self_loop_attention(attention)
    assert not torch.equal(expected, torch.ones_like(expected))
    for args in ((adj_t,), (adj_t, torch.ones(5))):
        with pytest.raises(ValueError, match='got one without values'):
            self_loop_attention(*args)
    jit = torch.jit.script(self_loop_attention)
    with pytest.raises(Exception, match='got one without values'):
        jit(adj_t, None, None)


def test_a_pair_in_another_container_is_named_as_such():
    # The edge index was checked after 'alpha': a list [edge_index, alpha],
    # a longer tuple or a layer's float output passed alone were all told
    # "'alpha' is required".
    edge_index = torch.tensor([[0, 1, 1], [1, 0, 1]])
    alpha = torch.tensor([0.5, 0.5, 0.5])
    with pytest.raises(TypeError) as info:
        self_loop_attention([edge_index, alpha])
    assert str(info.value) == (
        "Expected 'edge_index' to be a torch.Tensor of shape [2, num_edges] "
        '(got list)'
    )
    with pytest.raises(TypeError, match=r'shape \[2, num_edges\] \(got tup'):
        self_loop_attention((edge_index, alpha, 2))
    with pytest.raises(TypeError, match="'edge_index' of an integer dtype"):
        self_loop_attention(torch.rand(2, 4))
    # A right edge index alone still asks for 'alpha':
    with pytest.raises(ValueError, match="'alpha' is required"):
        self_loop_attention(edge_index)
