import warnings

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.nn.models.basic_gnn import BasicGNN
from torch_geometric.utils import erdos_renyi_graph

from torch_geometric_gate.nn import GATEConv
from torch_geometric_gate.nn.models import GATE
from torch_geometric_gate.utils import self_loop_attention


def _graph(num_nodes=12, seed=0):
    torch.manual_seed(seed)
    edge_index = erdos_renyi_graph(num_nodes, 0.3)
    # An input self-loop: GATEConv keeps exactly one loop per node.
    edge_index = torch.cat([edge_index, torch.tensor([[0], [0]])], dim=1)
    return edge_index


def _dense_mean_aggregation(edge_index, num_nodes):
    adj = torch.zeros(num_nodes, num_nodes, dtype=torch.float64)
    adj[edge_index[1], edge_index[0]] = 1.0  # Row: target, column: source.
    adj.fill_diagonal_(1.0)
    return adj / adj.sum(dim=1, keepdim=True)


def _blocks(model):
    r"""The orthogonal blocks D_l of the looks-linear weights, one effective
    (out, in) map per layer (heads of an averaging last layer averaged)."""
    blocks = []
    num_layers = len(model.convs)
    for i, conv in enumerate(model.convs):
        w = conv.lin.weight.detach().double()
        out, inp = w.size()
        first, last = i == 0, i == num_layers - 1
        rows = out if last else out // 2
        cols = inp if first else inp // 2
        d = w[:rows, :cols]
        if last:
            d = d.view(conv.heads, -1, cols).mean(dim=0)
        blocks.append(d)
    return blocks


@pytest.mark.parametrize('num_layers', [1, 2, 3, 4])
@pytest.mark.parametrize('heads', [1, 2])
@pytest.mark.parametrize('share_weights', [False, True])
def test_looks_linear_network_is_linear_at_init(
    num_layers, heads, share_weights
):
    num_nodes, in_channels = 12, 5
    edge_index = _graph(num_nodes)
    torch.manual_seed(1)
    x = torch.randn(num_nodes, in_channels)
    model = GATE(
        in_channels,
        8,
        num_layers,
        out_channels=3,
        heads=heads,
        share_weights=share_weights,
    )
    out = model(x, edge_index).double()

    a = _dense_mean_aggregation(edge_index, num_nodes)
    expected = x.double()
    for d in _blocks(model):
        expected = a @ expected @ d.t()
    assert torch.allclose(out, expected, atol=1e-5)
    # Linear, with no activation after the last layer: f(-x) = -f(x).
    assert torch.allclose(model(-x, edge_index).double(), -out, atol=1e-5)

    # The weights are the mirrored blocks:
    for i, conv in enumerate(model.convs):
        w = conv.lin.weight
        if 0 < i < num_layers - 1:
            r, c = w.size(0) // 2, w.size(1) // 2
            assert torch.equal(w[r:, c:], w[:r, :c])
            assert torch.equal(w[:r, c:], -w[:r, :c])
        for lin in (conv.lin_src, conv.lin_dst):
            assert (lin is conv.lin) == share_weights
            if i > 0:
                c = w.size(1) // 2
                assert torch.equal(lin.weight[:, c:], -lin.weight[:, :c])
        assert not conv.att_neighbor.any() and not conv.att_self.any()


def test_glorot_network_is_not_linear_at_init():
    num_nodes = 12
    edge_index = _graph(num_nodes)
    torch.manual_seed(1)
    x = torch.randn(num_nodes, 5)
    model = GATE(5, 8, 3, out_channels=3, init='glorot')
    out = model(x, edge_index)
    # The map x -> out is not linear: f(-x) != -f(x).
    assert not torch.allclose(model(-x, edge_index), -out, atol=1e-4)


def test_reset_parameters_reapplies_looks_linear():
    model = GATE(4, 8, 3, out_channels=2)
    before = model.convs[1].lin.weight.detach().clone()
    model.reset_parameters()
    w = model.convs[1].lin.weight
    assert not torch.equal(w, before)
    assert torch.equal(w[4:, 4:], w[:4, :4])
    assert not model.convs[1].att_self.any()


def test_basic_gnn_conventions():
    x = torch.randn(6, 4)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    model = GATE(4, 8, 3, out_channels=2)
    assert isinstance(model, BasicGNN)
    assert [type(c) for c in model.convs] == [GATEConv] * 3
    assert model.convs[-1].bias is None
    assert str(model) == 'GATE(4, 2, num_layers=3, heads=1)'
    assert model(x, edge_index).shape == (6, 2)

    # Without `out_channels`, the last layer outputs `hidden_channels`:
    assert GATE(4, 8, 2)(x, edge_index).shape == (6, 8)

    # Heads as in PyG's `GAT`: concat `hidden // heads` per head, average in
    # the output layer:
    model = GATE(4, 8, 3, out_channels=2, heads=4)
    assert [(c.out_channels, c.heads, c.concat) for c in model.convs] == [
        (2, 4, True),
        (2, 4, True),
        (2, 4, False),
    ]
    assert model(x, edge_index).shape == (6, 2)
    model = GATE(4, 6, 2, out_channels=2, heads=4, concat=False)
    assert model.convs[0].out_channels == 6
    assert model(x, edge_index).shape == (6, 2)

    # `jk`, `norm`, `bias` and conv arguments pass through:
    for jk in ['cat', 'max', 'last']:
        model = GATE(4, 8, 3, out_channels=2, jk=jk, norm='batch_norm')
        assert model(x, edge_index).shape == (6, 2)
        _, alphas = model.forward_with_self_attention(x, edge_index)
        assert len(alphas) == 3
    model = GATE(
        4, 8, 2, out_channels=2, bias=True, negative_slope=0.2, edge_dim=3
    )
    assert model.convs[0].bias is not None
    assert model.convs[0].negative_slope == 0.2
    edge_attr = torch.randn(6, 3)
    assert model(x, edge_index, edge_attr=edge_attr).shape == (6, 2)


def test_forward_with_self_attention():
    num_nodes = 12
    edge_index = _graph(num_nodes)
    torch.manual_seed(3)
    x = torch.randn(num_nodes, 5)
    model = GATE(5, 8, 3, out_channels=3, heads=2)

    # At initialisation: uniform over each node's neighbors and itself.
    out, alphas = model.forward_with_self_attention(x, edge_index)
    assert torch.equal(out, model(x, edge_index))
    deg = torch.zeros(num_nodes).index_add_(
        0, edge_index[1], (edge_index[0] != edge_index[1]).float()
    )
    assert len(alphas) == 3
    for alpha_vv in alphas:
        assert alpha_vv.shape == (num_nodes, 2)
        assert torch.allclose(
            alpha_vv, (1 / (deg + 1)).view(-1, 1).expand(-1, 2)
        )

    # After training steps: equal to a layer-by-layer recomputation.
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    y = torch.randint(0, 3, (num_nodes,))
    for _ in range(5):
        opt.zero_grad()
        F.cross_entropy(model(x, edge_index), y).backward()
        opt.step()
    out, alphas = model.forward_with_self_attention(x, edge_index)
    h = x
    for i, conv in enumerate(model.convs):
        h, (ei, alpha) = conv(h, edge_index, return_attention_weights=True)
        expected = self_loop_attention(ei, alpha, num_nodes)
        assert torch.allclose(alphas[i], expected, atol=1e-6)
        assert not torch.allclose(alphas[i], alphas[i].mean(), atol=1e-3)
        if i < 2:
            h = h.relu()
    assert torch.allclose(out, h, atol=1e-6)
    assert torch.allclose(out, model(x, edge_index))


def test_jit_script():
    num_nodes = 12
    edge_index = _graph(num_nodes)
    x = torch.randn(num_nodes, 5)
    model = GATE(5, 8, 3, out_channels=3, heads=2)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        jit = torch.jit.script(model)
    assert torch.allclose(jit(x, edge_index), model(x, edge_index))
    out, alphas = jit.forward_with_self_attention(x, edge_index)
    out_ref, alphas_ref = model.forward_with_self_attention(x, edge_index)
    assert torch.allclose(out, out_ref)
    assert all(
        torch.allclose(a, b) for a, b in zip(alphas, alphas_ref, strict=True)
    )


def test_compile_without_graph_breaks():
    import torch._dynamo as dynamo

    num_nodes = 12
    edge_index = _graph(num_nodes)
    x = torch.randn(num_nodes, 5)
    model = GATE(5, 8, 3, out_channels=3)
    out_ref, alphas_ref = model.forward_with_self_attention(x, edge_index)

    dynamo.reset()
    explanation = dynamo.explain(model)(x, edge_index)
    assert explanation.graph_break_count == 0
    dynamo.reset()
    explanation = dynamo.explain(model.forward_with_self_attention)(
        x, edge_index
    )
    assert explanation.graph_break_count == 0

    dynamo.reset()
    compiled = torch.compile(
        model.forward_with_self_attention, fullgraph=True, backend='eager'
    )
    out, alphas = compiled(x, edge_index)
    assert torch.allclose(out, out_ref)
    assert all(
        torch.allclose(a, b) for a, b in zip(alphas, alphas_ref, strict=True)
    )
    dynamo.reset()


def test_fallback_init_warns():
    # Odd hidden width: neither rows nor columns can be mirrored.
    with pytest.warns(UserWarning, match='keeps the Glorot initialisation'):
        model = GATE(4, 7, 3, out_channels=2)
    x = torch.randn(5, 4)
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    assert model(x, edge_index).shape == (5, 2)

    with pytest.warns(UserWarning, match='lazy input channels'):
        model = GATE(-1, 8, 2, out_channels=2)
    assert model(x, edge_index).shape == (5, 2)

    # Nothing to fall back from:
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        GATE(3, 8, 1, out_channels=5)
        GATE(3, 7, 2, out_channels=2, init='glorot')


def test_bad_arguments():
    with pytest.raises(ValueError, match="'init' must be one of"):
        GATE(4, 8, 2, init='xavier')
    with pytest.raises(ValueError, match='divisible by'):
        GATE(4, 6, 2, heads=4)
    with pytest.raises(ValueError, match="'num_layers' must be a positive"):
        GATE(4, 8, 0)
    with pytest.raises(TypeError, match="'hidden_channels' must be a"):
        GATE(4, 8.0, 2)
    with pytest.raises(ValueError, match="'out_channels' must be None or"):
        GATE(4, 8, 2, out_channels=0)
