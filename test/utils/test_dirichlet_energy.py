import pytest
import torch
from torch_geometric.utils import erdos_renyi_graph

from torch_geometric_gate.utils import dirichlet_energy


def _dense(x, edge_index=None):
    x = x.double()
    dist = torch.cdist(x, x).pow(2)  # N x N, fine for the test.
    if edge_index is None:
        return 0.5 * dist.sum()
    return 0.5 * dist[edge_index[0], edge_index[1]].sum()


def test_against_dense_computation():
    torch.manual_seed(0)
    x = torch.randn(40, 5) * 3 + 100  # A large mean: cancellation test.
    edge_index = erdos_renyi_graph(40, 0.2)
    assert torch.allclose(dirichlet_energy(x).double(), _dense(x), rtol=1e-5)
    assert torch.allclose(
        dirichlet_energy(x, edge_index).double(),
        _dense(x, edge_index),
        rtol=1e-5,
    )
    assert dirichlet_energy(x).dtype == torch.float32


def test_paper_normalisation():
    # One-hot features of two classes: every ordered pair of different
    # classes contributes 2, and 1/2 sum over ordered pairs counts each
    # unordered pair once: 2 * n0 * n1.
    y = torch.tensor([0, 0, 0, 1, 1])
    x = torch.nn.functional.one_hot(y).float()
    assert float(dirichlet_energy(x)) == 2 * 3 * 2
    # An undirected edge stored in both directions counts once:
    edge_index = torch.tensor([[0, 3, 0, 1], [3, 0, 1, 0]])
    assert float(dirichlet_energy(x, edge_index)) == 2.0


def test_invariances():
    torch.manual_seed(1)
    x = torch.randn(30, 4, dtype=torch.float64)
    edge_index = erdos_renyi_graph(30, 0.3)
    for ei in (None, edge_index):
        e = dirichlet_energy(x, ei)
        assert torch.allclose(dirichlet_energy(x + 5.0, ei), e)
        assert torch.allclose(dirichlet_energy(2 * x, ei), 4 * e)
        perm = torch.randperm(30)
        if ei is None:
            assert torch.allclose(dirichlet_energy(x[perm]), e)
    assert float(dirichlet_energy(torch.ones(6, 3))) == 0.0
    assert (
        float(dirichlet_energy(x, torch.empty(2, 0, dtype=torch.long))) == 0.0
    )


def test_large_graph_without_dense_matrix():
    x = torch.randn(100_000, 8)
    edge_index = torch.randint(0, 100_000, (2, 500_000))
    assert dirichlet_energy(x) > 0
    assert dirichlet_energy(x, edge_index) > 0


def test_errors():
    with pytest.raises(TypeError, match='floating-point'):
        dirichlet_energy(torch.ones(3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r'\[num_nodes, channels\]'):
        dirichlet_energy(torch.ones(3, 2, 2))
    with pytest.raises(ValueError, match=r'\[2, num_edges\]'):
        dirichlet_energy(torch.ones(3, 2), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match='out of range'):
        dirichlet_energy(torch.ones(3, 2), torch.tensor([[0], [3]]))


def test_rejects_non_integer_and_negative_edge_index():
    x = torch.tensor([[0.0], [1.0]])
    edge_index = torch.tensor([[0, 1], [1, 0]])
    assert dirichlet_energy(x, edge_index) == 1.0
    # A bool index was read as a mask (0.5) and a float one as indices:
    for dtype in [torch.bool, torch.float]:
        with pytest.raises(TypeError, match='integer dtype'):
            dirichlet_energy(x, edge_index.to(dtype))
    with pytest.raises(TypeError, match='torch.Tensor'):
        dirichlet_energy(x, edge_index.tolist())
    with pytest.raises(ValueError, match=r'\[0, 2\).*minimum -1'):
        dirichlet_energy(x, torch.tensor([[0, -1], [1, 0]]))
    assert dirichlet_energy(x, edge_index.int()) == 1.0


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_half_precision_input_returns_float32(dtype):
    # An energy far beyond float16's range (65504) was returned as inf.
    torch.manual_seed(2)
    x = (torch.randn(1000, 16) * 10).to(dtype)
    edge_index = erdos_renyi_graph(1000, 0.05)
    for ei in (None, edge_index):
        energy = dirichlet_energy(x, ei)
        assert energy.dtype == torch.float32
        assert torch.isfinite(energy)
        expected = _dense(x, ei)
        assert torch.allclose(energy.double(), expected, rtol=1e-5)
    # float32 and float64 keep their dtype:
    for dtype in (torch.float32, torch.float64):
        assert dirichlet_energy(x.to(dtype)).dtype == dtype


@pytest.mark.parametrize('layout', ['coo', 'csr'])
def test_a_sparse_adjacency_is_named_as_such(layout):
    # It was "Expected 'edge_index' of an integer dtype (got float32)".
    from torch_geometric.utils import to_torch_sparse_tensor

    edge_index = torch.tensor([[0, 1], [1, 0]])
    layout = torch.sparse_coo if layout == 'coo' else torch.sparse_csr
    adj = to_torch_sparse_tensor(edge_index, layout=layout)
    with pytest.raises(TypeError, match='got a sparse adjacency; its'):
        dirichlet_energy(torch.ones(2, 3), adj)


@pytest.mark.parametrize('layout', [torch.sparse_coo, torch.sparse_csr])
def test_sparse_features_give_their_dense_energy(layout):
    # Sparse features failed inside 'mean' or indexing with a backend error.
    torch.manual_seed(0)
    x = torch.randn(8, 5) * (torch.rand(8, 5) < 0.3)  # mostly zeros
    edge_index = erdos_renyi_graph(8, 0.4)
    sparse = x.to_sparse(layout=layout)
    assert torch.allclose(dirichlet_energy(sparse), _dense(x).float())
    assert torch.allclose(
        dirichlet_energy(sparse, edge_index), _dense(x, edge_index).float()
    )
