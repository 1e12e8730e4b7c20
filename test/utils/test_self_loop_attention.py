import pytest
import torch
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
