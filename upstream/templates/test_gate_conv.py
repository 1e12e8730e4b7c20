from typing import Tuple

import pytest
import torch
from torch import Tensor

import torch_geometric.typing
from torch_geometric import EdgeIndex
from torch_geometric.nn import GATEConv, GATv2Conv
from torch_geometric.testing import (
    is_full_test,
    onlyFullTest,
    onlyLinux,
    withDevice,
    withPackage,
)
from torch_geometric.typing import Adj, SparseTensor
from torch_geometric.utils import (
    to_torch_coo_tensor,
    to_torch_csc_tensor,
    to_torch_csr_tensor,
)


def randomize_attention(conv: GATEConv):
    # Both attention vectors start at zero (uniform attention):
    with torch.no_grad():
        conv.att_neighbor.normal_()
        conv.att_self.normal_()


@pytest.mark.parametrize('residual', [False, True])
@pytest.mark.parametrize('share_weights', [False, True])
def test_gate_conv(residual, share_weights):
    x1 = torch.randn(4, 8)
    x2 = torch.randn(2, 8)
    edge_index = torch.tensor([[0, 1, 2, 3], [0, 0, 1, 1]])
    adj1 = to_torch_csc_tensor(edge_index, size=(4, 4))

    conv = GATEConv(8, 32, heads=2, residual=residual,
                    share_weights=share_weights)
    randomize_attention(conv)
    assert str(conv) == 'GATEConv(8, 32, heads=2)'
    out = conv(x1, edge_index)
    assert out.size() == (4, 64)
    assert torch.allclose(conv(x1, edge_index), out)
    assert torch.allclose(conv(x1, adj1.t()), out, atol=1e-6)

    if torch_geometric.typing.WITH_TORCH_SPARSE:
        adj2 = SparseTensor.from_edge_index(edge_index, sparse_sizes=(4, 4))
        assert torch.allclose(conv(x1, adj2.t()), out, atol=1e-6)

    if is_full_test():

        class MyModule(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = conv

            def forward(
                self,
                x: Tensor,
                edge_index: Adj,
            ) -> Tensor:
                return self.conv(x, edge_index)

        jit = torch.jit.script(MyModule())
        assert torch.allclose(jit(x1, edge_index), out)
        assert torch.allclose(jit(x1, adj1.t()), out, atol=1e-6)

        if torch_geometric.typing.WITH_TORCH_SPARSE:
            assert torch.allclose(jit(x1, adj2.t()), out, atol=1e-6)

    # Test `return_attention_weights`: the input self-loop (0, 0) keeps its
    # place with attention 0, and 4 self-loops are appended:
    result = conv(x1, edge_index, return_attention_weights=True)
    assert torch.allclose(result[0], out)
    assert result[1][0].size() == (2, 8)
    assert result[1][1].size() == (8, 2)
    assert result[1][1].min() >= 0 and result[1][1].max() <= 1
    assert torch.equal(result[1][0][:, :4], edge_index)
    assert torch.equal(result[1][0][:, 4:], torch.arange(4).repeat(2, 1))
    assert torch.all(result[1][1][0] == 0)

    # Sparse adjacencies hold the attention of the self-loops appended:
    result = conv(x1, adj1.t(), return_attention_weights=True)
    assert torch.allclose(result[0], out, atol=1e-6)
    assert result[1][0].size() == torch.Size([4, 4, 2])
    assert result[1][0]._nnz() == 7

    if torch_geometric.typing.WITH_TORCH_SPARSE:
        result = conv(x1, adj2.t(), return_attention_weights=True)
        assert torch.allclose(result[0], out, atol=1e-6)
        assert result[1].sizes() == [4, 4, 2] and result[1].nnz() == 7

    if is_full_test():

        class MyModule(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = conv

            def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
                return self.conv(x, edge_index)

        jit = torch.jit.script(MyModule())
        assert torch.allclose(jit(x1, edge_index), out)

    # Test bipartite message passing:
    adj1 = to_torch_csc_tensor(edge_index, size=(4, 2))

    out = conv((x1, x2), edge_index)
    assert out.size() == (2, 64)
    assert torch.allclose(conv((x1, x2), edge_index), out)
    assert torch.allclose(conv((x1, x2), adj1.t()), out, atol=1e-6)

    result = conv((x1, x2), edge_index, return_attention_weights=True)
    assert torch.allclose(result[0], out)
    assert result[1][0].size() == (2, 6)  # min(4, 2) self-loops appended
    assert result[1][1].size() == (6, 2)

    if torch_geometric.typing.WITH_TORCH_SPARSE:
        adj2 = SparseTensor.from_edge_index(edge_index, sparse_sizes=(4, 2))
        assert torch.allclose(conv((x1, x2), adj2.t()), out, atol=1e-6)

    if is_full_test():

        class MyModule(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = conv

            def forward(
                self,
                x: Tuple[Tensor, Tensor],
                edge_index: Adj,
            ) -> Tensor:
                return self.conv(x, edge_index)

        jit = torch.jit.script(MyModule())
        assert torch.allclose(jit((x1, x2), edge_index), out)

        if torch_geometric.typing.WITH_TORCH_SPARSE:
            assert torch.allclose(jit((x1, x2), adj2.t()), out, atol=1e-6)


def test_gate_conv_edge_index_and_sparse_layouts():
    x = torch.randn(4, 8)
    edge_index = torch.tensor([[0, 1, 2, 3, 1], [0, 0, 1, 1, 3]])

    conv = GATEConv(8, 16, heads=2, bias=False)
    randomize_attention(conv)
    assert conv.bias is None
    out, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
    assert out.size() == (4, 32)

    # `EdgeIndex` input, returned with the appended self-loops:
    adj = EdgeIndex(edge_index, sparse_size=(4, 4))
    assert torch.allclose(conv(x, adj), out)
    result = conv(x, adj, return_attention_weights=True)
    assert isinstance(result[1][0], EdgeIndex)
    assert result[1][0].sparse_size() == (4, 4)
    assert torch.equal(result[1][0].as_tensor(), ei)
    assert torch.allclose(result[1][1], alpha)

    # Transposed sparse adjacencies of any layout, the weights in the same
    # layout (without the masked input self-loop):
    for to_sparse in (to_torch_coo_tensor, to_torch_csr_tensor,
                      to_torch_csc_tensor):
        adj = to_sparse(edge_index, size=(4, 4)).t()
        assert torch.allclose(conv(x, adj), out, atol=1e-6)
        result = conv(x, adj, return_attention_weights=True)
        assert result[1][0].layout == adj.layout
        assert result[1][0].size() == (4, 4, 2)
        assert result[1][0]._nnz() == 8


@withDevice
def test_gate_conv_empty_edge_index(device):
    x = torch.randn(0, 8, device=device)
    edge_index = torch.empty(2, 0, dtype=torch.long, device=device)

    conv = GATEConv(8, 32, heads=2).to(device)
    out = conv(x, edge_index)
    assert out.size() == (0, 64)

    # Without edges, every node attends to its own self-loop only:
    x = torch.randn(3, 8, device=device)
    out = conv(x, edge_index)
    assert torch.allclose(out, conv.lin(x) + conv.bias, atol=1e-6)


@pytest.mark.parametrize('aggr', ['add', 'mean', 'max'])
def test_gate_conv_aggr_and_flow(aggr):
    x = torch.randn(4, 8)
    edge_index = torch.tensor([[0, 1, 2, 3, 1], [1, 0, 1, 1, 3]])
    edge_attr = torch.randn(edge_index.size(1), 3)

    conv = GATEConv(8, 16, heads=2, edge_dim=3, aggr=aggr)
    randomize_attention(conv)
    out = conv(x, edge_index, edge_attr)
    assert out.size() == (4, 32)

    # Input self-loops are masked out (their features unread) under every
    # aggregation:
    loops = torch.tensor([[2, 0], [2, 0]])
    ei = torch.cat([edge_index, loops], dim=1)
    ea = torch.cat([edge_attr, torch.randn(2, 3)], dim=0)
    assert torch.allclose(conv(x, ei, ea), out, atol=1e-6)

    # `flow='target_to_source'` reads the edges the other way around:
    conv2 = GATEConv(8, 16, heads=2, edge_dim=3, aggr=aggr,
                     flow='target_to_source')
    conv2.load_state_dict(conv.state_dict())
    assert torch.allclose(conv2(x, edge_index.flip(0), edge_attr), out,
                          atol=1e-6)
    assert torch.allclose(conv2(x, ei.flip(0), ea), out, atol=1e-6)


def test_gate_conv_errors():
    x = torch.randn(4, 8)
    edge_index = torch.tensor([[0, 1, 2, 3], [0, 0, 1, 1]])

    with pytest.raises(ValueError, match="'share_weights=True' needs"):
        GATEConv((8, 4), 16, share_weights=True)
    with pytest.raises(ValueError, match="'decomposed_layers > 1'"):
        GATEConv(8, 16, decomposed_layers=2)

    conv = GATEConv(8, 16)
    with pytest.raises(ValueError, match="'edge_attr' needs a layer with"):
        conv(x, edge_index, torch.randn(4, 3))
    with pytest.raises(ValueError, match="to be of integer type"):
        conv(x, edge_index.float())

    if is_full_test():
        jit = torch.jit.script(conv)
        with pytest.raises(torch.jit.Error, match="not supported under"):
            jit(x, edge_index, None, True)


def test_gate_conv_without_self_loops():
    x = torch.randn(4, 8)
    edge_index = torch.tensor([[0, 1, 2, 3, 2], [0, 0, 1, 1, 2]])

    # The graph is taken as given, its self-loops are scored with `att_self`:
    conv = GATEConv(8, 16, heads=2, add_self_loops=False)
    randomize_attention(conv)
    out, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
    assert out.size() == (4, 32)
    assert torch.equal(ei, edge_index)
    assert alpha.size() == (5, 2)
    assert torch.allclose(alpha[4], torch.ones(2))  # Node 2's own edge.
    assert torch.allclose(out[3], conv.bias)  # Node 3 has no in-edges.

    # In a bipartite graph, no edge is a self-loop:
    out = conv((x, x[:3]), edge_index)
    assert out.size() == (3, 32)


def test_gate_conv_with_edge_attr():
    x = torch.randn(4, 8)
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 0, 1, 1]])
    edge_weight = torch.randn(edge_index.size(1))
    edge_attr = torch.randn(edge_index.size(1), 4)

    conv = GATEConv(8, 32, heads=2, edge_dim=1, fill_value=0.5)
    out = conv(x, edge_index, edge_weight)
    assert out.size() == (4, 64)

    conv = GATEConv(8, 32, heads=2, edge_dim=1, fill_value='mean')
    out = conv(x, edge_index, edge_weight)
    assert out.size() == (4, 64)

    conv = GATEConv(8, 32, heads=2, edge_dim=4, fill_value=0.5)
    randomize_attention(conv)
    out = conv(x, edge_index, edge_attr)
    assert out.size() == (4, 64)
    conv.fill_value = torch.full((4, ), 0.5)
    assert torch.allclose(conv(x, edge_index, edge_attr), out)

    conv = GATEConv(8, 32, heads=2, edge_dim=4, fill_value='mean')
    out, (ei, alpha) = conv(x, edge_index, edge_attr,
                            return_attention_weights=True)
    assert out.size() == (4, 64)
    assert ei.size() == (2, 8) and alpha.size() == (8, 2)

    # Lazy initialization of `edge_dim`:
    conv = GATEConv(-1, 32, heads=2, edge_dim=-1)
    assert conv(x, edge_index, edge_attr).size() == (4, 64)
    assert conv.lin_edge.in_channels == 4


def test_gate_conv_acts_like_an_mlp():
    # With `att_neighbor = 0` and a large `att_self`, every node attends to
    # itself only (alpha_vv ~ 1), and the layer computes `W x_v + b`:
    x = torch.rand(5, 8) + 0.5
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 0], [1, 0, 1, 1, 0, 4]])

    conv = GATEConv(8, 16, heads=2)
    with torch.no_grad():
        conv.lin_src.weight.abs_()
        conv.lin_dst.weight.abs_()
        conv.att_neighbor.zero_()
        conv.att_self.fill_(100.0)
        conv.bias.normal_()

    out, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
    loop = ei[0] == ei[1]
    assert torch.allclose(alpha[loop], torch.ones(5, 2))
    assert torch.allclose(alpha[~loop], torch.zeros(6, 2), atol=1e-6)
    assert torch.allclose(out, conv.lin(x) + conv.bias, atol=1e-5)

    # Neighbors do not matter anymore:
    assert torch.allclose(conv(x, edge_index[:, :2]), out, atol=1e-5)

    # A large negative `att_self` switches the node itself off instead:
    with torch.no_grad():
        conv.att_self.fill_(-100.0)
    _, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
    assert torch.allclose(alpha[ei[0] == ei[1]][:2], torch.zeros(2, 2))


@pytest.mark.parametrize('edge_dim', [None, 3])
@pytest.mark.parametrize('fill_value', [0.5, 'mean'])
def test_gate_conv_with_equal_attention_vectors_is_gatv2_conv(
        edge_dim, fill_value):
    # `att_self = att_neighbor` and `lin = lin_src` recover `GATv2Conv`,
    # which drops the input self-loop (2, 2) that `GATEConv` masks; neither
    # reads its edge features for the `'mean'` of the self-loops':
    x = torch.randn(4, 8)
    edge_index = torch.tensor([[0, 1, 2, 3, 1, 2, 0], [1, 0, 1, 1, 3, 2, 2]])
    edge_attr = torch.randn(edge_index.size(1), 3) if edge_dim else None

    gatv2 = GATv2Conv(8, 16, heads=2, edge_dim=edge_dim, fill_value=fill_value)
    conv = GATEConv(8, 16, heads=2, edge_dim=edge_dim, fill_value=fill_value,
                    negative_slope=0.2)
    with torch.no_grad():
        gatv2.att.normal_()
        gatv2.lin_l.bias.zero_()
        gatv2.lin_r.bias.zero_()
        conv.lin.weight.copy_(gatv2.lin_l.weight)
        conv.lin_src.weight.copy_(gatv2.lin_l.weight)
        conv.lin_dst.weight.copy_(gatv2.lin_r.weight)
        conv.att_neighbor.copy_(gatv2.att)
        conv.att_self.copy_(gatv2.att)
        if edge_dim is not None:
            conv.lin_edge.weight.copy_(gatv2.lin_edge.weight)

    expected = gatv2(x, edge_index, edge_attr)
    assert torch.allclose(conv(x, edge_index, edge_attr), expected, atol=1e-6)


@pytest.mark.parametrize('add_self_loops', [True, False])
def test_gate_conv_explain(add_self_loops):
    from torch_geometric.explain.algorithm.utils import clear_masks, set_masks

    x = torch.randn(4, 8)
    edge_index = torch.tensor([[0, 1, 2, 3, 2], [1, 2, 3, 0, 2]])
    conv = GATEConv(8, 16, add_self_loops=add_self_loops)
    randomize_attention(conv)
    out = conv(x, edge_index)

    # One mask entry per input edge; the appended self-loops are kept:
    mask = torch.nn.Parameter(torch.ones(5))
    set_masks(conv, mask, edge_index, apply_sigmoid=False)
    assert torch.allclose(conv(x, edge_index), out)
    for size in (4, 6):
        set_masks(conv, torch.nn.Parameter(torch.ones(size)), edge_index,
                  apply_sigmoid=False)
        with pytest.raises(ValueError, match=f'{size} entries for 5 edges'):
            conv(x, edge_index)
    clear_masks(conv)

    # Each entry scales the message of its own input edge:
    _, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
    mask = torch.rand(5)
    scale = torch.cat([mask, mask.new_ones(ei.size(1) - 5)]).view(-1, 1)
    msg = conv.lin(x)[ei[0]] * alpha * scale
    expected = torch.zeros(4, 16).index_add_(0, ei[1], msg) + conv.bias
    set_masks(conv, torch.nn.Parameter(mask), edge_index, apply_sigmoid=False)
    assert torch.allclose(conv(x, edge_index), expected, atol=1e-6)
    clear_masks(conv)

    # ... after a sigmoid, if asked for:
    logits = torch.randn(5)
    scale = torch.cat([logits.sigmoid(), torch.ones(ei.size(1) - 5)])
    msg = conv.lin(x)[ei[0]] * alpha * scale.view(-1, 1)
    expected = torch.zeros(4, 16).index_add_(0, ei[1], msg) + conv.bias
    set_masks(conv, torch.nn.Parameter(logits), edge_index, apply_sigmoid=True)
    assert torch.allclose(conv(x, edge_index), expected, atol=1e-6)
    clear_masks(conv)

    conv.explain = True  # Without a mask:
    with pytest.raises(ValueError, match="pre-defined 'edge_mask'"):
        conv(x, edge_index)


@withDevice
@onlyLinux
@onlyFullTest
@withPackage('torch>=2.1.0')
@pytest.mark.parametrize('add_self_loops', [True, False])
def test_compile_gate_conv(device, add_self_loops):
    import torch._dynamo as dynamo

    x = torch.randn(10, 16, device=device)
    edge_index = torch.randint(0, x.size(0), (2, 40), device=device)
    edge_index[:, 0] = 3  # An input self-loop.

    # Input self-loops are masked and fresh ones appended, so that shapes do
    # not depend on the data, and `add_self_loops=True` compiles too:
    conv = GATEConv(16, 32, heads=2, add_self_loops=add_self_loops)
    conv = conv.to(device)
    randomize_attention(conv)

    explanation = dynamo.explain(conv)(x, edge_index)
    assert explanation.graph_break_count == 0

    dynamo.reset()
    out = torch.compile(conv)(x, edge_index)
    assert torch.allclose(conv(x, edge_index), out, atol=1e-6)
