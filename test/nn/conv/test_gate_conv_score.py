import pytest
import torch

from torch_geometric_gate import GATEConv
from torch_geometric_gate.nn.conv import gate_conv


@pytest.mark.parametrize('heads,channels', [(1, 5), (3, 4), (16, 16)])
def test_score_paths_match_per_head_dot_products(heads, channels):
    torch.manual_seed(0)
    conv = GATEConv(6, channels, heads=heads)
    torch.nn.init.normal_(conv.att_neighbor)
    torch.nn.init.normal_(conv.att_self)
    # The block-diagonal GEMM below the threshold, the batched path above:
    block = heads * heads * channels <= gate_conv._MAX_BLOCK_DIAGONAL
    assert conv._block_diagonal_score == block

    z = torch.randn(40, heads, channels, requires_grad=True)
    score = conv._score(z)
    assert score.shape == (40, 2, heads)
    expected = torch.stack(
        [(z * conv.att_neighbor).sum(-1), (z * conv.att_self).sum(-1)], 1
    )
    assert torch.allclose(score, expected, atol=1e-5)

    grad = torch.randn_like(score)
    got = torch.autograd.grad(
        score, (z, conv.att_neighbor, conv.att_self), grad
    )
    ref = torch.autograd.grad(
        expected, (z, conv.att_neighbor, conv.att_self), grad
    )
    for a, b in zip(got, ref):
        assert torch.allclose(a, b, atol=1e-5)
    # The GEMM path hands a contiguous gradient to the ReLU and gathers:
    if block:
        assert got[0].is_contiguous()


def test_score_paths_give_the_same_layer_output():
    torch.manual_seed(1)
    x = torch.randn(30, 6)
    edge_index = torch.randint(0, 30, (2, 120))
    conv = GATEConv(6, 4, heads=3)
    torch.nn.init.normal_(conv.att_neighbor)
    torch.nn.init.normal_(conv.att_self)
    assert conv._block_diagonal_score
    out = conv(x, edge_index)
    conv._block_diagonal_score = False
    assert torch.allclose(conv(x, edge_index), out, atol=1e-5)
