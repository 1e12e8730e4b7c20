import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn.models.basic_gnn import BasicGNN
from torch_geometric.testing import onlyNeighborSampler
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


def _heads(conv, weight):
    r"""``weight`` as ``[heads, out, in]`` when the layer averages its heads
    (each head's block a layer of its own), else as ``[1, out, in]``."""
    groups = 1 if conv.concat else conv.heads
    return weight.view(groups, -1, weight.size(1))


def _blocks(model):
    r"""The orthogonal blocks D_l of the looks-linear weights, one effective
    (out, in) map per layer (the blocks of averaged heads averaged)."""
    blocks = []
    num_layers = len(model.convs)
    for i, conv in enumerate(model.convs):
        w = _heads(conv, conv.lin.weight.detach().double())
        _, out, inp = w.size()
        first, last = i == 0, i == num_layers - 1
        rows = out if last else out // 2
        cols = inp if first else inp // 2
        blocks.append(w[:, :rows, :cols].mean(dim=0))
    return blocks


@pytest.mark.parametrize('num_layers', [1, 2, 3, 4])
@pytest.mark.parametrize('heads,concat', [(1, True), (2, True), (2, False),
                                          (3, False)])  # fmt: skip
@pytest.mark.parametrize('share_weights', [False, True])
def test_looks_linear_network_is_linear_at_init(
    num_layers, heads, concat, share_weights
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
        concat=concat,
        share_weights=share_weights,
    )
    out = model(x, edge_index).double()

    a = _dense_mean_aggregation(edge_index, num_nodes)
    expected = x.double()
    for d in _blocks(model):
        # No layer maps to a lower rank (averaged heads that cancel did).
        assert torch.linalg.matrix_rank(d) == min(d.size())
        expected = a @ expected @ d.t()
    assert torch.allclose(out, expected, atol=1e-5)
    # Linear, with no activation after the last layer: f(-x) = -f(x).
    assert torch.allclose(model(-x, edge_index).double(), -out, atol=1e-5)

    # The weights are the mirrored blocks (each averaged head's):
    for i, conv in enumerate(model.convs):
        for w in _heads(conv, conv.lin.weight) if i < num_layers - 1 else ():
            r, c = w.size(0) // 2, w.size(1) // 2
            assert torch.equal(w[r:], -w[:r])
            if i > 0:
                assert torch.equal(w[:r, c:], -w[:r, :c])
        w = conv.lin.weight
        for lin in (conv.lin_src, conv.lin_dst):
            assert (lin is None) == share_weights  # GATE_S: `lin` only.
            lin = lin or conv.lin
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


@pytest.mark.parametrize('norm', ['layer_norm', 'graph_norm'])
def test_jit_script_with_a_norm_that_takes_the_batch(norm):
    # PyG's BasicGNN cannot be scripted with these norms (the last layer's
    # identity does not take the batch); GATE can, and computes the same.
    num_nodes = 12
    edge_index = _graph(num_nodes)
    x = torch.randn(num_nodes, 5)
    batch = torch.arange(num_nodes) // 6
    model = GATE(5, 8, 3, out_channels=3, heads=2, norm=norm).eval()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        jit = torch.jit.script(model)
    want = model(x, edge_index, batch=batch, batch_size=2)
    got = jit(x, edge_index, batch=batch, batch_size=2)
    assert torch.allclose(got, want, atol=1e-6)
    # The batch reaches the norms (per graph, not over all nodes):
    assert not torch.allclose(model(x, edge_index), want, atol=1e-4)
    out, _ = jit.forward_with_self_attention(x, edge_index, batch=batch)
    assert torch.allclose(out, model(x, edge_index, batch=batch), atol=1e-6)


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
    # PyG's BasicGNN raised a bare AssertionError (an AttributeError for a
    # non-string):
    for jk in ('foo', 'LAST', 'none', 1):
        with pytest.raises(ValueError, match="'jk' must be one of.*'cat'"):
            GATE(4, 8, 2, jk=jk)
    for jk in (None, 'last', 'cat', 'max', 'lstm'):
        assert GATE(4, 8, 2, out_channels=3, jk=jk).jk_mode == jk


# Mini-batches with PyG's loaders #############################################


def _loader_data(num_nodes=60, seed=0):
    torch.manual_seed(seed)
    edge_index = erdos_renyi_graph(num_nodes, 0.06, directed=True)
    loops = torch.arange(0, num_nodes, 7).repeat(2, 1)  # input self-loops
    return Data(
        x=torch.randn(num_nodes, 6),
        edge_index=torch.cat([edge_index, loops], dim=1),
        y=torch.randint(3, (num_nodes,)),
    )


def _random_gate(seed=0, **kwargs):
    torch.manual_seed(seed)
    model = GATE(6, 16, num_layers=3, out_channels=3, heads=2, **kwargs)
    with torch.no_grad():
        for conv in model.convs:
            conv.att_neighbor.normal_()
            conv.att_self.normal_()
    return model


def _per_hop_counts(batch, num_hops):
    r"""The per-hop node and edge counts of a sampled batch. `pyg-lib`'s
    sampler reports them; `torch-sparse`'s lists nodes and edges hop by hop
    without counting them, so they are counted here from the hop distance of
    each node to the seeds.
    """
    if getattr(batch, 'num_sampled_nodes', None) is not None:
        return batch.num_sampled_nodes, batch.num_sampled_edges
    src, dst = batch.edge_index
    hop = torch.full((batch.num_nodes,), num_hops + 1)
    hop[: batch.batch_size] = 0
    for h in range(1, num_hops + 1):
        new = src[hop[dst] == h - 1]
        hop[new[hop[new] > h]] = h
    # The sampler's order is hop by hop, for nodes and for edges (the edges
    # of hop `h` point to nodes of hop `h - 1`):
    assert torch.equal(hop, hop.sort().values) and hop.max() <= num_hops
    assert torch.equal(hop[dst], hop[dst].sort().values)
    nodes = [int((hop == h).sum()) for h in range(num_hops + 1)]
    edges = [int((hop[dst] == h - 1).sum()) for h in range(1, num_hops + 1)]
    return nodes, edges


@onlyNeighborSampler
@pytest.mark.parametrize('add_self_loops', [True, False])
def test_neighbor_loader_matches_full_batch(add_self_loops):
    data = _loader_data()
    model = _random_gate(add_self_loops=add_self_loops).eval()
    with torch.no_grad():
        full = model(data.x, data.edge_index)
        loader = NeighborLoader(
            data, num_neighbors=[-1] * 3, batch_size=16, shuffle=True
        )
        seeds = []
        for batch in loader:
            size = batch.batch_size
            expected = full[batch.n_id[:size]]
            out = model(batch.x, batch.edge_index)
            assert torch.allclose(out[:size], expected, atol=1e-5)

            # `BasicGNN`'s trimming drops, layer by layer, what cannot reach
            # a seed anymore; the seeds' outputs stay the same:
            nodes, edges = _per_hop_counts(batch, 3)
            trimmed = model(
                batch.x,
                batch.edge_index,
                num_sampled_nodes_per_hop=nodes,
                num_sampled_edges_per_hop=edges,
            )
            assert trimmed.size(0) == nodes[0] + nodes[1] < batch.num_nodes
            assert torch.allclose(trimmed[:size], expected, atol=1e-5)
            seeds.append(batch.n_id[:size])
    assert torch.equal(torch.cat(seeds).sort().values, torch.arange(60))


@onlyNeighborSampler
def test_neighbor_loader_training_matches_full_batch():
    data = _loader_data(seed=1)
    model = _random_gate(seed=1)
    reference = copy.deepcopy(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    ref_optimizer = torch.optim.Adam(reference.parameters(), lr=0.01)
    loader = NeighborLoader(
        data, num_neighbors=[-1] * 3, batch_size=20, shuffle=True
    )
    for _ in range(2):
        for batch in loader:
            size = batch.batch_size
            nodes, edges = _per_hop_counts(batch, 3)
            optimizer.zero_grad()
            out = model(
                batch.x,
                batch.edge_index,
                num_sampled_nodes_per_hop=nodes,
                num_sampled_edges_per_hop=edges,
            )[:size]
            loss = F.cross_entropy(out, batch.y[:size])
            loss.backward()
            optimizer.step()

            # The same step, full batch, with the loss on the same seeds:
            seeds = batch.n_id[:size]
            ref_optimizer.zero_grad()
            ref_out = reference(data.x, data.edge_index)[seeds]
            ref_loss = F.cross_entropy(ref_out, data.y[seeds])
            ref_loss.backward()
            ref_optimizer.step()
            assert torch.allclose(loss, ref_loss, atol=1e-5)

    for p, q in zip(model.parameters(), reference.parameters()):  # noqa: B905
        assert torch.allclose(p, q, atol=1e-4)
    assert not torch.allclose(
        model.convs[0].att_self, _random_gate(seed=1).convs[0].att_self
    )


@onlyNeighborSampler
@pytest.mark.parametrize('add_self_loops', [True, False])
def test_layer_wise_inference_matches_full_batch(add_self_loops):
    data = _loader_data(seed=2)
    model = _random_gate(
        seed=2, add_self_loops=add_self_loops, norm='batch_norm'
    )
    model.train()
    model(data.x, data.edge_index)  # running statistics for `norm`
    model.eval()
    with torch.no_grad():
        full = model(data.x, data.edge_index)
    loader = NeighborLoader(data, num_neighbors=[-1], batch_size=16)
    assert torch.allclose(model.inference(loader), full, atol=1e-5)
    assert torch.allclose(model.inference(loader, cache=True), full, atol=1e-5)


# Edge weights and empty graphs ###############################################


def test_edge_weight_is_rejected():
    # BasicGNN's forward silently dropped the edge weights: the output was
    # that of the unweighted graph.
    x = torch.randn(6, 4)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    edge_weight = torch.rand(6)
    model = GATE(4, 8, 2, out_channels=2)
    with pytest.raises(ValueError, match=r"does not use 'edge_weight'.*edge_"):
        model(x, edge_index, edge_weight=edge_weight)
    with pytest.raises(ValueError, match="does not use 'edge_weight'"):
        model(x, edge_index, edge_weight)  # positional, as in BasicGNN
    # The suggested alternative works:
    model = GATE(4, 8, 2, out_channels=2, edge_dim=1)
    out = model(x, edge_index, edge_attr=edge_weight.view(-1, 1))
    assert out.shape == (6, 2)
    # and scripted, the check holds too:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        jit = torch.jit.script(model)
    assert torch.allclose(
        jit(x, edge_index, edge_attr=edge_weight.view(-1, 1)), out
    )
    with pytest.raises(Exception, match="does not use 'edge_weight'"):
        jit(x, edge_index, edge_weight=edge_weight)


def test_forward_matches_basic_gnn_forward():
    # GATE.forward repeats BasicGNN.forward (to check 'edge_weight' first,
    # TorchScript cannot call the parent's): same outputs, trimming too.
    torch.manual_seed(0)
    # Nodes ordered by hop (2 seeds, 4 at hop 1, 6 at hop 2) and edges by
    # hop, as NeighborLoader returns them:
    hop1 = torch.tensor([[2, 3, 4, 5, 2], [0, 0, 1, 1, 1]])
    hop2 = torch.tensor([[6, 7, 8, 9, 10, 11], [2, 3, 4, 5, 2, 3]])
    edge_index = torch.cat([hop1, hop2], dim=1)
    x = torch.randn(12, 4)
    edge_attr = torch.randn(edge_index.size(1), 3)
    trim = dict(
        num_sampled_nodes_per_hop=[2, 4, 6],
        num_sampled_edges_per_hop=[5, 6],
    )
    for kwargs, trims in [
        (dict(), [{}, trim]),
        (dict(norm='batch_norm', act_first=True), [{}, trim]),
        (dict(edge_dim=3, heads=2), [{}, trim]),
        (dict(jk='cat'), [{}]),  # BasicGNN trims without 'jk' only.
    ]:
        model = _random_gate_small(**kwargs).eval()
        ea = edge_attr if 'edge_dim' in kwargs else None
        for t in trims:
            out = model(x, edge_index, edge_attr=ea, **t)
            ref = BasicGNN.forward(model, x, edge_index, edge_attr=ea, **t)
            assert torch.equal(out, ref)
            if t:
                full = model(x, edge_index, edge_attr=ea)
                assert torch.allclose(out[:2], full[:2], atol=1e-6)


def _random_gate_small(**kwargs):
    model = GATE(4, 8, num_layers=2, out_channels=3, **kwargs)
    with torch.no_grad():
        for conv in model.convs:
            conv.att_neighbor.normal_()
            conv.att_self.normal_()
    return model


def _check_empty_graph_output(model, heads):
    edge_index = torch.empty(2, 0, dtype=torch.long)
    x = torch.randn(0, 5)
    out = model(x, edge_index)
    assert out.shape == (0, 3)
    out, alphas = model.forward_with_self_attention(x, edge_index)
    assert out.shape == (0, 3)
    assert [tuple(a.shape) for a in alphas] == [(0, heads)] * 2


@pytest.mark.parametrize(
    'kwargs', [dict(), dict(jk='cat'), dict(heads=2, edge_dim=2)]
)
def test_empty_graph(kwargs):
    # Like PyG's GAT (GATv2Conv returns an empty output), 0 nodes and 0
    # edges give an empty output of the right shape.
    model = GATE(5, 8, 2, out_channels=3, **kwargs).eval()
    _check_empty_graph_output(model, kwargs.get('heads', 1))


@pytest.mark.parametrize(
    'kwargs', [dict(), dict(jk='cat'), dict(heads=2, edge_dim=2)]
)
def test_empty_graph_scripted(kwargs):
    # The message-passing path (TorchScript) shows that the model itself
    # handles an empty graph.
    model = GATE(5, 8, 2, out_channels=3, **kwargs).eval()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        jit = torch.jit.script(model)
    _check_empty_graph_output(jit, kwargs.get('heads', 1))


def test_nodes_without_edges():
    # Only self-loops: every node attends to itself alone (alpha_vv = 1).
    model = GATE(5, 8, 2, out_channels=3, heads=2)
    x = torch.randn(4, 5)
    out, alphas = model.forward_with_self_attention(
        x, torch.empty(2, 0, dtype=torch.long)
    )
    assert out.shape == (4, 3)
    assert all(torch.allclose(a, torch.ones(4, 2)) for a in alphas)


def test_numpy_integers_are_taken_as_gat_takes_them():
    # A sweep's NumPy integers were refused ('hidden_channels' must be a
    # positive int (got int64)), as PyG's GAT takes them; the model keeps
    # Python ints (its scripted form needs them).
    import numpy as np

    x = torch.randn(6, 4)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    torch.manual_seed(0)
    model = GATE(4, np.int64(8), np.int32(3), np.int64(2), heads=np.int64(2))
    sizes = (model.hidden_channels, model.num_layers, model.out_channels)
    assert sizes == (8, 3, 2) and all(type(s) is int for s in sizes)
    assert [c.heads for c in model.convs] == [2, 2, 2]
    torch.manual_seed(0)
    reference = GATE(4, 8, 3, 2, heads=2)
    assert torch.equal(model(x, edge_index), reference(x, edge_index))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        jit = torch.jit.script(model)
    assert torch.allclose(jit(x, edge_index), reference(x, edge_index))
    for bad in (True, 2.0, np.float64(2.0)):
        with pytest.raises(TypeError, match="'heads' must be a positive int"):
            GATE(4, 8, 2, heads=bad)
        with pytest.raises(ValueError, match="'out_channels' must be None"):
            GATE(4, 8, 2, out_channels=bad)
    with pytest.raises(ValueError, match="'num_layers' must be a positive"):
        GATE(4, 8, np.int64(0))


def test_heads_need_not_divide_an_unused_hidden_width():
    # One layer that maps to `out_channels` averages its heads and has no
    # hidden width: PyG's GAT takes GAT(4, 6, 1, 3, heads=4), GATE refused
    # it ('hidden_channels' (got 6) must be divisible by 'heads').
    x = torch.randn(6, 4)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    model = GATE(4, 6, 1, out_channels=3, heads=4)
    conv = model.convs[0]
    assert (conv.out_channels, conv.heads, conv.concat) == (3, 4, False)
    assert model(x, edge_index).shape == (6, 3)
    # Where a layer concatenates `hidden_channels`, the check holds:
    for kwargs in (
        dict(num_layers=2, out_channels=3),
        dict(num_layers=1),
        dict(num_layers=1, out_channels=3, jk='last'),
    ):
        with pytest.raises(ValueError, match='must be divisible by'):
            GATE(4, 6, heads=4, **kwargs)


def test_forward_with_self_attention_bipartite():
    # A bipartite (x_src, x_dst) input, which forward takes, raised an
    # AttributeError ('tuple' object has no attribute 'size'). The
    # self-attention has one row per target node; checked against a dense
    # computation of the layer's softmax.
    torch.manual_seed(0)
    x_src = torch.randn(6, 4, dtype=torch.float64)
    x_dst = torch.randn(4, 5, dtype=torch.float64)
    # Target 1's input self-loop (1, 1) is masked; target 3 has none.
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5, 5], [0, 1, 1, 2, 2, 3, 0]])
    model = GATE((4, 5), 8, 1, out_channels=3, heads=2).double()
    conv = model.convs[0]
    with torch.no_grad():
        conv.att_neighbor.normal_()
        conv.att_self.normal_()
    out, (alpha_vv,) = model.forward_with_self_attention(
        (x_src, x_dst), edge_index
    )
    assert torch.equal(out, model((x_src, x_dst), edge_index))

    h = (2, conv.out_channels)
    q_src = conv.lin_src(x_src).view(-1, *h)
    q_dst = conv.lin_dst(x_dst).view(-1, *h)
    expected = torch.zeros(4, 2, dtype=torch.float64)
    for v in range(4):
        nbrs = [u for u, w in edge_index.t().tolist() if w == v and u != v]
        scores = [(conv.att_neighbor * (q_src[u] + q_dst[v]).relu()).sum(-1)
                  for u in nbrs]  # fmt: skip
        scores.append((conv.att_self * (q_src[v] + q_dst[v]).relu()).sum(-1))
        expected[v] = torch.stack(scores).softmax(dim=0)[-1]
    assert alpha_vv.shape == (4, 2)
    assert torch.allclose(alpha_vv, expected, atol=1e-12)


@pytest.mark.parametrize('num_layers', [1, 2, 3])
@pytest.mark.parametrize('heads,concat', [(1, True), (2, True), (2, False)])
def test_looks_linear_with_residual_is_linear_at_init(
    num_layers, heads, concat
):
    # The skip-connection kept its Glorot weight: with residual=True the
    # looks-linear network was not linear (f(x + y) != f(x) + f(y)).
    num_nodes = 12
    edge_index = _graph(num_nodes)
    torch.manual_seed(1)
    x = torch.randn(num_nodes, 6, dtype=torch.float64)
    y = torch.randn_like(x)
    model = GATE(6, 8, num_layers, out_channels=3, heads=heads,
                 concat=concat, residual=True).double()  # fmt: skip

    def f(z):
        return model(z, edge_index)

    assert torch.allclose(f(x + y), f(x) + f(y), atol=1e-10)
    # Layer by layer, A H D^T + H R^T with the blocks D and R:
    a = _dense_mean_aggregation(edge_index, num_nodes)
    expected = x
    for i, (conv, d) in enumerate(zip(model.convs, _blocks(model))):  # noqa: B905
        r = conv.res.weight.detach()
        rows = r.size(0) if i == num_layers - 1 else r.size(0) // 2
        cols = r.size(1) if i == 0 else r.size(1) // 2
        expected = a @ expected @ d.t() + expected @ r[:rows, :cols].t()
    assert torch.allclose(f(x), expected, atol=1e-10)


def test_v2_of_gat():
    # GAT(..., v2=True) users switching to GATE got "MessagePassing.__init__()
    # got an unexpected keyword argument 'v2'". GATE's layers are
    # GATv2-scored: v2=True builds the same model, v2=False is refused.
    x = torch.randn(6, 4)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    torch.manual_seed(0)
    model = GATE(4, 8, 2, out_channels=3, heads=2, v2=True)
    torch.manual_seed(0)
    reference = GATE(4, 8, 2, out_channels=3, heads=2)
    assert torch.equal(model(x, edge_index), reference(x, edge_index))
    with pytest.raises(ValueError, match=r"no 'v2=False' \(GATConv\) form"):
        GATE(4, 8, 2, v2=False)


def test_forward_with_self_attention_refuses_forward_s_argument_order():
    # forward's (x, edge_index, edge_weight, edge_attr) passed positionally
    # put the edge features into 'batch', which no norm read: dropped.
    num_nodes = 12
    edge_index = _graph(num_nodes)
    x = torch.randn(num_nodes, 5)
    edge_attr = torch.randn(edge_index.size(1), 3)
    model = GATE(5, 8, 2, out_channels=3, edge_dim=3)
    with pytest.raises(ValueError, match="'batch' must be a one-dimensional"):
        model.forward_with_self_attention(x, edge_index, None, edge_attr)
    out, _ = model.forward_with_self_attention(
        x, edge_index, edge_attr, torch.zeros(num_nodes, dtype=torch.long)
    )
    assert torch.allclose(out, model(x, edge_index, edge_attr=edge_attr))


def test_to_hetero():
    # As PyG's GAT, GATE converts with to_hetero. The edge-weight check
    # raised on the proxy that FX tracing passes for every argument.
    from torch_geometric.data import HeteroData
    from torch_geometric.nn import to_hetero

    torch.manual_seed(0)
    data = HeteroData()
    data['a'].x = torch.randn(5, 4)
    data['b'].x = torch.randn(3, 4)
    data['a', 'to', 'b'].edge_index = torch.tensor(
        [[0, 1, 2, 4], [0, 1, 2, 2]]
    )
    data['b', 'rev', 'a'].edge_index = torch.tensor([[0, 1, 2], [0, 3, 4]])
    data['a', 'near', 'a'].edge_index = torch.tensor([[0, 1, 3], [1, 0, 2]])
    model = GATE((4, 4), 8, 2, out_channels=3, add_self_loops=False)
    model = to_hetero(model, data.metadata(), aggr='sum')
    for conv in model.convs:
        for lin in conv.values():
            torch.nn.init.normal_(lin.att_neighbor)  # not the zero init
    out = model(data.x_dict, data.edge_index_dict)

    # Independently: each layer sums its edge types' GATEConv outputs.
    x_a, x_b = data['a'].x, data['b'].x
    ei = data.edge_index_dict
    for i, conv in enumerate(model.convs):
        h_b = conv['a__to__b']((x_a, x_b), ei['a', 'to', 'b'])
        h_a = conv['b__rev__a']((x_b, x_a), ei['b', 'rev', 'a'])
        h_a = h_a + conv['a__near__a']((x_a, x_a), ei['a', 'near', 'a'])
        x_a, x_b = (h_a.relu(), h_b.relu()) if i == 0 else (h_a, h_b)
    assert out['a'].shape == (5, 3) and out['b'].shape == (3, 3)
    assert torch.allclose(out['a'], x_a, atol=1e-6)
    assert torch.allclose(out['b'], x_b, atol=1e-6)


@onlyNeighborSampler
def test_layer_wise_inference_refuses_to_drop_edge_features():
    # BasicGNN.inference passes x and edge_index only: a model with
    # 'edge_dim' returned the output without the graph's edge features.
    torch.manual_seed(0)
    data = _loader_data(seed=2)
    data.edge_attr = torch.randn(data.num_edges, 2)
    model = GATE(data.num_features, 8, 2, out_channels=3, edge_dim=2).eval()
    for conv in model.convs:
        torch.nn.init.normal_(conv.att_neighbor)
    loader = NeighborLoader(data, num_neighbors=[-1], batch_size=16)
    full = model(data.x, data.edge_index, edge_attr=data.edge_attr)
    without = model(data.x, data.edge_index)
    assert not torch.allclose(full, without, atol=1e-3)
    with pytest.raises(ValueError, match=r"cannot pass the graph's 'edge_at"):
        model.inference(loader)
    # Without edge features in the graph, the result is forward's:
    del data.edge_attr
    loader = NeighborLoader(data, num_neighbors=[-1], batch_size=16)
    assert torch.allclose(model.inference(loader), without, atol=1e-5)
