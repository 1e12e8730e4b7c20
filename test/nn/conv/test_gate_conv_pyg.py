r"""GATEConv with PyG's own tools: explainers, lazy edge features, the return
type of :obj:`forward`, autocast.
"""

import copy

import pytest
import torch
import torch_geometric
from conv_testing import NUM_NODES, randomize_attention, selected_kernel
from torch import Tensor
from torch_geometric.explain import (
    AttentionExplainer,
    Explainer,
    GNNExplainer,
)
from torch_geometric.explain.algorithm.utils import clear_masks, set_masks
from torch_geometric.nn import GATv2Conv, to_hetero
from torch_geometric.utils import scatter, to_torch_sparse_tensor

from torch_geometric_gate import GATEConv, attention_kernel

# Input self-loops (2 -> 2, 5 -> 5), a duplicate edge (0 -> 1 twice) and a
# node without in-edges (4):
EDGE_INDEX = torch.tensor(
    [
        [0, 0, 1, 2, 2, 3, 1, 3, 5, 4],
        [1, 1, 0, 2, 3, 0, 2, 2, 5, 5],
    ]
)
LOOP = EDGE_INDEX[0] == EDGE_INDEX[1]


class Net(torch.nn.Module):
    def __init__(self, add_self_loops: bool):
        super().__init__()
        self.conv1 = GATEConv(5, 4, heads=2, add_self_loops=add_self_loops)
        self.conv2 = GATEConv(8, 3, add_self_loops=add_self_loops)
        randomize_attention(self.conv1)
        randomize_attention(self.conv2)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        x = self.conv1(x, edge_index).relu()
        return self.conv2(x, edge_index).sum(0, keepdim=True)  # a graph


@pytest.mark.parametrize('add_self_loops', [True, False])
@pytest.mark.parametrize('bipartite', [False, True])
def test_explain_message_masks_input_edges(add_self_loops, bipartite):
    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, 5)
    conv = GATEConv(5, 4, heads=2, add_self_loops=add_self_loops)
    randomize_attention(conv)
    if bipartite:
        edge_index = EDGE_INDEX[:, EDGE_INDEX[1] < 4]
        inp, num_dst = (x, torch.randn(4, 5)), 4
    else:
        edge_index, inp, num_dst = EDGE_INDEX, x, NUM_NODES
    num_edges = edge_index.size(1)

    # Reference: the messages alpha_{u,v} W x_u of the layer's own edges,
    # each input edge scaled by its mask entry, the appended loops by one:
    _, (ei, alpha) = conv(inp, edge_index, return_attention_weights=True)
    mask = torch.rand(num_edges)
    scale = torch.cat([mask, torch.ones(ei.size(1) - num_edges)])
    assert ei.size(1) - num_edges == (num_dst if add_self_loops else 0)
    msg = (
        conv.lin(x).view(-1, 2, 4)[ei[0]]
        * (alpha * scale.view(-1, 1))[..., None]
    )
    expected = scatter(msg, ei[1], 0, num_dst, 'sum').view(num_dst, 8)
    expected = expected + conv.bias

    set_masks(conv, mask, edge_index, apply_sigmoid=False)
    try:
        out = conv(inp, edge_index)
        with pytest.raises(ValueError, match='edge mask has 10 entries'):
            set_masks(conv, torch.rand(10), edge_index, apply_sigmoid=False)
            conv(inp, edge_index[:, :3])
    finally:
        clear_masks(conv)
    assert torch.allclose(out, expected, atol=1e-6)


@pytest.mark.parametrize('add_self_loops', [True, False])
@pytest.mark.parametrize('with_loops', [True, False])
def test_gnn_explainer(add_self_loops, with_loops):
    torch.manual_seed(1)
    x = torch.randn(NUM_NODES, 5)
    edge_index = EDGE_INDEX if with_loops else EDGE_INDEX[:, ~LOOP]
    loop = edge_index[0] == edge_index[1]
    model = Net(add_self_loops)
    explainer = Explainer(
        model,
        algorithm=GNNExplainer(epochs=3),
        explanation_type='model',
        edge_mask_type='object',
        model_config=dict(
            mode='regression', task_level='graph', return_type='raw'
        ),
    )
    explanation = explainer(x, edge_index)
    edge_mask = explanation.edge_mask
    assert edge_mask.shape == (edge_index.size(1),)
    # Every edge but the masked input loops carries a message:
    assert (edge_mask[~loop] > 0).all()
    if add_self_loops:  # input loops carry nothing, so no gradient
        assert torch.equal(edge_mask[loop], torch.zeros(int(loop.sum())))
    else:
        assert (edge_mask[loop] > 0).all()
    # The masks are cleared: the model is back to its plain output.
    assert torch.equal(model(x, edge_index), Net.forward(model, x, edge_index))
    assert model.conv1._edge_mask is None


@pytest.mark.parametrize('add_self_loops', [True, False])
@pytest.mark.parametrize('with_loops', [True, False])
def test_attention_explainer(add_self_loops, with_loops):
    torch.manual_seed(2)
    x = torch.randn(NUM_NODES, 5)
    edge_index = EDGE_INDEX if with_loops else EDGE_INDEX[:, ~LOOP]
    num_edges = edge_index.size(1)
    model = Net(add_self_loops)
    explainer = Explainer(
        model,
        algorithm=AttentionExplainer(reduce='max'),
        explanation_type='model',
        edge_mask_type='object',
        model_config=dict(
            mode='regression', task_level='graph', return_type='raw'
        ),
    )
    edge_mask = explainer(x, edge_index).edge_mask

    # The attention of the input edges, which come first in both modes:
    h, (_, alpha1) = model.conv1(x, edge_index, return_attention_weights=True)
    _, (_, alpha2) = model.conv2(
        h.relu(), edge_index, return_attention_weights=True
    )
    expected = torch.stack(
        [alpha1[:num_edges].amax(-1), alpha2[:num_edges].amax(-1)]
    ).amax(0)
    assert torch.allclose(edge_mask, expected)
    loop = edge_index[0] == edge_index[1]
    if add_self_loops:  # the masked input loops
        assert torch.equal(edge_mask[loop], torch.zeros(int(loop.sum())))


def test_lazy_edge_dim():
    torch.manual_seed(3)
    x = torch.randn(NUM_NODES, 5)
    edge_attr = torch.randn(EDGE_INDEX.size(1), 3)
    lazy = GATEConv(5, 4, heads=2, edge_dim=-1)
    assert lazy.edge_dim == -1
    out = lazy(x, EDGE_INDEX, edge_attr)
    assert lazy.lin_edge.weight.shape == (8, 3)

    # Same parameters, same output as a layer built with `edge_dim=3`:
    conv = GATEConv(5, 4, heads=2, edge_dim=3)
    conv.load_state_dict(lazy.state_dict())
    assert torch.allclose(conv(x, EDGE_INDEX, edge_attr), out)
    randomize_attention(lazy)
    conv.load_state_dict(lazy.state_dict())
    assert torch.allclose(
        lazy(x, EDGE_INDEX, edge_attr), conv(x, EDGE_INDEX, edge_attr)
    )

    # Once materialized, the size is checked:
    with pytest.raises(ValueError, match=r"'edge_attr' of shape \[10, 3\]"):
        lazy(x, EDGE_INDEX, torch.randn(EDGE_INDEX.size(1), 2))
    with pytest.raises(ValueError, match='or -1 for lazy initialization'):
        GATEConv(5, 4, edge_dim=-2)
    with pytest.raises(TypeError, match="'edge_dim' must be a positive int"):
        GATEConv(5, 4, edge_dim=2.0)


def test_return_attention_weights_false_returns_output_only():
    torch.manual_seed(4)
    x = torch.randn(NUM_NODES, 5)
    conv = GATEConv(5, 4, heads=2)
    randomize_attention(conv)
    out = conv(x, EDGE_INDEX)
    adj_t = to_torch_sparse_tensor(
        EDGE_INDEX[:, [0, 2, 3, 4, 5, 6, 7, 8, 9]].flip(0),
        size=(NUM_NODES, NUM_NODES),
    )
    pyg = tuple(map(int, torch_geometric.__version__.split('.')[:2]))
    for edge_index in [EDGE_INDEX, adj_t]:
        if pyg >= (2, 8):  # As GATv2Conv since PyG 2.8 (before: a tuple)
            ref = GATv2Conv(5, 4, heads=2)(
                x, edge_index, return_attention_weights=False
            )
            assert isinstance(ref, Tensor)
        plain = conv(x, edge_index, return_attention_weights=False)
        assert isinstance(plain, Tensor)
        assert torch.allclose(plain, conv(x, edge_index), atol=1e-6)
        res = conv(x, edge_index, return_attention_weights=True)
        assert isinstance(res, tuple) and torch.allclose(res[0], plain)
    assert torch.equal(conv(x, EDGE_INDEX), out)

    jit = torch.jit.script(conv)
    plain = jit(x, EDGE_INDEX, return_attention_weights=False)
    assert isinstance(plain, Tensor) and torch.allclose(plain, out)


def test_attention_dtype_under_autocast():
    torch.manual_seed(5)
    x = torch.randn(NUM_NODES, 16)
    ref = GATv2Conv(16, 8, heads=2)
    for heads, channels, add_self_loops in [
        (2, 8, True),
        (2, 8, False),
        (8, 64, True),  # many heads
    ]:
        conv = GATEConv(16, channels, heads, add_self_loops=add_self_loops)
        randomize_attention(conv)
        out32, (_, alpha32) = conv(
            x, EDGE_INDEX, return_attention_weights=True
        )
        with torch.autocast('cpu', dtype=torch.bfloat16):
            out, (_, alpha) = conv(
                x, EDGE_INDEX, return_attention_weights=True
            )
            # Training under autocast: the backward pass runs and gives
            # every parameter a finite gradient.
            conv.zero_grad()
            conv(x, EDGE_INDEX).float().sum().backward()
            for name, param in conv.named_parameters():
                assert param.grad is not None, name
                assert torch.isfinite(param.grad).all(), name
            ref_out, (_, ref_alpha) = ref(
                x, EDGE_INDEX, return_attention_weights=True
            )
        assert ref_alpha.dtype == ref_out.dtype == torch.float32
        assert alpha.dtype == ref_alpha.dtype
        assert out.dtype == ref_out.dtype
        # The softmax runs in float32; the inputs are rounded to bfloat16:
        assert torch.allclose(alpha, alpha32, atol=0.05)
        assert torch.allclose(out, out32, atol=0.1, rtol=0.05)


def test_to_hetero_with_lazy_edge_dim():
    torch.manual_seed(6)
    x_dict = {'paper': torch.randn(8, 5), 'author': torch.randn(4, 3)}
    edge_index_dict = {
        ('paper', 'cites', 'paper'): torch.randint(8, (2, 12)),
        ('author', 'writes', 'paper'): torch.stack(
            [torch.randint(4, (10,)), torch.randint(8, (10,))]
        ),
    }
    edge_index_dict[('paper', 'rev_writes', 'author')] = edge_index_dict[
        ('author', 'writes', 'paper')
    ].flip(0)
    edge_attr_dict = {
        ('paper', 'cites', 'paper'): torch.randn(12, 2),
        ('author', 'writes', 'paper'): torch.randn(10, 7),
        ('paper', 'rev_writes', 'author'): torch.randn(10, 1),
    }

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = GATEConv(
                (-1, -1), 4, heads=2, edge_dim=-1, add_self_loops=False
            )

        def forward(self, x, edge_index, edge_attr):
            return self.conv(x, edge_index, edge_attr)

    metadata = (['paper', 'author'], list(edge_index_dict))
    model = to_hetero(Net(), metadata, aggr='sum')
    out = model(x_dict, edge_index_dict, edge_attr_dict)
    assert out['paper'].shape == (8, 8) and out['author'].shape == (4, 8)
    convs = model.conv
    assert convs['paper__cites__paper'].lin_edge.in_channels == 2
    assert convs['author__writes__paper'].lin_edge.in_channels == 7
    # The sum over edge types of each type's layer:
    expected = sum(
        convs['__'.join(et)](
            (x_dict[et[0]], x_dict[et[2]]),
            edge_index_dict[et],
            edge_attr_dict[et],
        )
        for et in edge_index_dict
        if et[2] == 'paper'
    )
    assert torch.allclose(out['paper'], expected, atol=1e-6)


def test_negative_slope_trains():
    # The fused backward reads the activation's sign from its output, which
    # a negative slope does not keep: such a layer takes the plain path.
    torch.manual_seed(6)
    x = torch.randn(NUM_NODES, 8, requires_grad=True)
    conv = GATEConv(8, 4, heads=2, negative_slope=-0.5)
    randomize_attention(conv)
    assert selected_kernel(conv, x) == 'reference'
    conv(x, EDGE_INDEX).sum().backward()
    assert torch.isfinite(x.grad).all()
    assert conv.att_self.grad is not None


# The layer's contract with PyG users, on the default (kernel) path and the
# reference path alike: each of these failed on the layer of 0.1.0.


def test_positional_arguments_follow_gatv2conv():
    conv = GATEConv(8, 4, 2, True, 0.2, 0.0, True, 3)
    ref = GATv2Conv(8, 4, 2, True, 0.2, 0.0, True, 3)
    assert conv.edge_dim == ref.edge_dim == 3
    assert not conv.share_weights
    conv = GATEConv(8, 4, 1, True, 0.0, 0.0, True, None, 0.5, False, True)
    assert conv.fill_value == 0.5 and conv.bias is None and conv.share_weights


@pytest.mark.parametrize('hook', [False, True])
def test_double_backward(hook):
    torch.manual_seed(0)
    conv = GATEConv(5, 4, heads=2, edge_dim=2).double()
    randomize_attention(conv)
    if hook:  # A hook changes nothing but the kernel that runs:
        conv.register_message_forward_hook(lambda *args: None)
    x = torch.randn(NUM_NODES, 5, dtype=torch.double, requires_grad=True)
    edge_attr = torch.randn(EDGE_INDEX.size(1), 2, dtype=torch.double)

    def penalty(kernel):
        conv.zero_grad()
        with attention_kernel(kernel):
            out = conv(x, EDGE_INDEX, edge_attr)
        (g,) = torch.autograd.grad(out.square().sum(), x, create_graph=True)
        g.square().sum().backward()  # A gradient penalty.
        return [p.grad.clone() for p in conv.parameters()]

    for got, expected in zip(penalty('auto'), penalty('reference')):
        assert torch.allclose(got, expected, atol=1e-10)


def test_torch_func_jacrev_and_vmap():
    from torch.func import jacrev, vmap

    torch.manual_seed(0)
    conv = GATEConv(5, 3, heads=2)
    randomize_attention(conv)
    x = torch.randn(NUM_NODES, 5)
    jac = jacrev(lambda x: conv(x, EDGE_INDEX))(x)
    assert jac.shape == (NUM_NODES, 6, NUM_NODES, 5)
    with attention_kernel('reference'):
        expected = torch.autograd.functional.jacobian(
            lambda x: conv(x, EDGE_INDEX), x
        )
    assert torch.allclose(jac, expected, atol=1e-6)
    xs = torch.randn(3, NUM_NODES, 5)
    out = vmap(lambda x: conv(x, EDGE_INDEX))(xs)
    assert torch.allclose(out[1], conv(xs[1], EDGE_INDEX), atol=1e-6)


@pytest.mark.parametrize('hook', [False, True])
def test_bf16_autocast_sums_in_float32(hook):
    torch.manual_seed(0)
    num_nodes = 300
    x = torch.randn(num_nodes, 16)
    # Node 0 has 299 neighbors, whose sum bf16 would round:
    edge_index = torch.stack(
        [torch.arange(1, num_nodes), torch.zeros(num_nodes - 1).long()]
    )
    conv = GATEConv(16, 8, heads=2, bias=False)
    randomize_attention(conv, 0.1)
    gatv2 = GATv2Conv(16, 8, heads=2, bias=False)
    if hook:
        conv.register_message_forward_hook(lambda *args: None)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = conv(x, edge_index)
        assert out.dtype == gatv2(x, edge_index).dtype == torch.float32
    # The same with the bf16 projections made exact in float64:
    with torch.autocast('cpu', dtype=torch.bfloat16):
        value = conv.lin(x)
    conv64 = copy.deepcopy(conv).double()
    with attention_kernel('reference'), torch.no_grad():
        conv64.lin.weight.copy_(conv.lin.weight.bfloat16())
        conv64.lin_src.weight.copy_(conv.lin_src.weight.bfloat16())
        conv64.lin_dst.weight.copy_(conv.lin_dst.weight.bfloat16())
        expected = conv64(x.bfloat16().double(), edge_index)
    assert value.dtype == torch.bfloat16
    err = (out.double() - expected).abs().max() / expected.abs().max()
    assert err < 2e-2  # bf16 scores; float32 sums of 299 terms


def test_bipartite_coinciding_indices_are_no_self_loops():
    torch.manual_seed(0)
    x_src, x_dst = torch.randn(3, 5), torch.randn(2, 5)
    edge_index = torch.tensor([[0, 1, 2, 1], [0, 0, 0, 1]])  # 0 -> 0, 1 -> 1
    conv = GATEConv((5, 5), 4, add_self_loops=False)
    with torch.no_grad():
        conv.att_self.fill_(100.0)  # Would make 0 -> 0 take all attention.
    _, (_, alpha) = conv(
        (x_src, x_dst), edge_index, return_attention_weights=True
    )
    # Scored with a_s = 0: uniform over the three edges into node 0.
    assert torch.allclose(alpha[:3], torch.full((3, 1), 1 / 3))
    # A homogeneous graph (or add_self_loops=True) does score its loops with
    # a_t:
    _, (_, alpha) = conv(x_src, edge_index, return_attention_weights=True)
    assert alpha[0].item() > 0.99


@pytest.mark.parametrize('kernel', ['auto', 'reference'])
@pytest.mark.parametrize('bipartite', [False, True])
def test_empty_graphs(kernel, bipartite):
    conv = GATEConv(5, 4, heads=2, edge_dim=2)
    with attention_kernel(kernel):
        for num_src, num_dst in [(0, 0), (0, 3), (3, 0)]:
            if not bipartite and num_src != num_dst:
                continue
            x_src = torch.randn(num_src, 5, requires_grad=True)
            x = (x_src, torch.randn(num_dst, 5)) if bipartite else x_src
            empty = torch.empty(2, 0, dtype=torch.long)
            out = conv(x, empty, torch.randn(0, 2))
            assert out.shape == (num_dst, 8)
            out.sum().backward()


@pytest.mark.xfail(
    torch.__version__ < (2, 9),
    reason='Inductor before torch 2.9 drops torch._assert_async: compiled '
    'code does not check the indices (torch 2.5.1, 2.6.0, 2.8.0)',
    strict=True,
)
def test_out_of_range_indices_fail_alike_eager_and_compiled():
    conv = GATEConv(5, 4)
    x = torch.randn(NUM_NODES, 5)
    compiled = torch.compile(conv, fullgraph=True)
    for bad in (-1, NUM_NODES):
        edge_index = torch.tensor([[0, bad], [1, 0]])
        for f in (conv, compiled):
            with pytest.raises(RuntimeError, match='out of range'):
                f(x, edge_index)
    torch._dynamo.reset()


def test_target_to_source_flow_with_bipartite_input():
    torch.manual_seed(0)
    x_src, x_dst = torch.randn(5, 3), torch.randn(2, 3)
    edge_index = torch.tensor([[0, 3, 4, 2], [0, 0, 1, 1]])
    conv = GATEConv((3, 3), 4, heads=2)
    randomize_attention(conv)
    flipped = GATEConv((3, 3), 4, heads=2, flow='target_to_source')
    flipped.load_state_dict(conv.state_dict())
    out = flipped((x_src, x_dst), edge_index.flip(0))
    # As GATv2Conv (PyG's message passing sizes the output by x[0] under
    # this flow), the targets' rows come first:
    ref = GATv2Conv((3, 3), 4, heads=2, flow='target_to_source')
    assert out.shape == ref((x_src, x_dst), edge_index.flip(0)).shape
    expected = conv((x_src, x_dst), edge_index)
    assert torch.allclose(out[:2], expected, atol=1e-6)


@pytest.mark.parametrize('fill_value', ['mean', 'max', 'add'])
def test_target_to_source_fill_value_reduces_the_aggregated_edges(fill_value):
    # The self-loops' edge features reduce the edges a node aggregates: row 0
    # under flow='target_to_source' (GATv2Conv reduces row 1 under either
    # flow, so its outputs change when the graph and the flow are flipped):
    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, 5)
    edge_attr = torch.randn(EDGE_INDEX.size(1), 3)
    conv = GATEConv(5, 4, heads=2, edge_dim=3, fill_value=fill_value)
    randomize_attention(conv)
    flipped = GATEConv(
        5, 4, heads=2, edge_dim=3, fill_value=fill_value,
        flow='target_to_source',
    )  # fmt: skip
    flipped.load_state_dict(conv.state_dict())
    expected = conv(x, EDGE_INDEX, edge_attr)
    out = flipped(x, EDGE_INDEX.flip(0), edge_attr)
    assert torch.allclose(out, expected, atol=1e-6)


def test_bad_scalar_arguments():
    for slope in (float('nan'), float('inf'), '0.2', True):
        with pytest.raises(ValueError, match="'negative_slope'"):
            GATEConv(5, 4, negative_slope=slope)
    with pytest.raises(ValueError, match="'fill_value' must be a finite"):
        GATEConv(5, 4, edge_dim=2, fill_value=float('nan'))
    with pytest.raises(ValueError, match="'fill_value' must be a finite"):
        GATEConv(5, 4, edge_dim=3, fill_value=torch.ones(2))
    GATEConv(5, 4, edge_dim=3, fill_value=torch.ones(3))  # fine
    with pytest.raises(ValueError, match='num_nodes, channels'):
        GATEConv(5, 4)((torch.randn(3, 5), None), EDGE_INDEX[:, :2])


def test_decomposed_layers_are_refused():
    # GATv2Conv fails inside PyG's propagate; say why instead:
    with pytest.raises(ValueError, match="'decomposed_layers > 1'"):
        GATEConv(5, 4, decomposed_layers=2)


@pytest.mark.parametrize('kernel', ['reference', 'chunked'])
def test_the_projections_are_their_modules(kernel):
    # The layer multiplied by the three modules' weights, one product: a
    # forward hook on `lin` never ran, a biased `lin` lost its bias (but
    # not with the same features as a pair), pruning's mask went stale.
    from torch.nn.utils import prune
    from torch_geometric.nn.dense.linear import Linear

    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, 4)
    conv = GATEConv(4, 3, heads=2)
    randomize_attention(conv)
    ran = []
    for name in ('lin', 'lin_src', 'lin_dst'):
        getattr(conv, name).register_forward_hook(
            lambda *args, name=name: ran.append(name)
        )
    with attention_kernel(kernel):
        conv(x, EDGE_INDEX)
    assert sorted(ran) == ['lin', 'lin_dst', 'lin_src']

    conv = GATEConv(4, 3, heads=2)
    randomize_attention(conv)
    conv.lin = Linear(4, 6, bias=True)
    with torch.no_grad():
        conv.lin.bias.fill_(100.0)
    with attention_kernel(kernel):
        out, pair = conv(x, EDGE_INDEX), conv((x, x), EDGE_INDEX)
    torch.testing.assert_close(out, pair)
    assert out.abs().max() > 50  # the values carry the bias

    conv = GATEConv(4, 3, heads=2)
    randomize_attention(conv)
    prune.l1_unstructured(conv.lin_src, 'weight', amount=0.5)
    optimizer = torch.optim.SGD(conv.parameters(), lr=0.1)
    for _ in range(2):  # (the stale pruned weight failed the second step)
        optimizer.zero_grad()
        with attention_kernel(kernel):
            conv(x, EDGE_INDEX).square().sum().backward()
        optimizer.step()
    with torch.no_grad(), attention_kernel(kernel):
        pruned = conv(x, EDGE_INDEX)
        conv.lin_src.weight_orig.zero_()  # what the mask keeps of it: none
        assert not torch.equal(conv(x, EDGE_INDEX), pruned)


def test_an_edge_projection_with_a_hook_runs_the_reference():
    # The kernels read lin_edge's weight: its hooks (and a bias) would be
    # skipped; 'auto' runs the reference, a forced kernel says why.
    x = torch.randn(NUM_NODES, 4)
    edge_attr = torch.randn(EDGE_INDEX.size(1), 2)
    conv = GATEConv(4, 3, edge_dim=2)
    ran = []
    conv.lin_edge.register_forward_hook(lambda *args: ran.append(1))
    assert selected_kernel(conv, x) == 'reference'
    conv(x, EDGE_INDEX, edge_attr)
    assert ran == [1]
    with attention_kernel('chunked'):
        with pytest.raises(RuntimeError, match="'lin_edge' has hooks"):
            conv(x, EDGE_INDEX, edge_attr)


def test_a_forced_kernel_says_what_keeps_it_from_the_edge_projection():
    x = torch.randn(NUM_NODES, 4)
    edge_attr = torch.randn(EDGE_INDEX.size(1), 2)
    lazy = GATEConv(4, 3, edge_dim=-1)
    conv = GATEConv(4, 3, edge_dim=2)
    params = {k: v.detach().clone() for k, v in conv.named_parameters()}
    for call, problem in [
        # (Once: it also named the uninitialized 'lin_edge'.)
        (
            lambda: lazy(x, EDGE_INDEX, edge_attr),
            "the lazy 'edge_dim' is not initialized yet",
        ),
        (  # The weights as plain tensors:
            lambda: torch.func.functional_call(
                conv, params, (x, EDGE_INDEX, edge_attr)
            ),
            "'lin_edge' has a weight that is not a parameter",
        ),
    ]:
        with attention_kernel('chunked'):
            with pytest.raises(RuntimeError, match=problem) as info:
                call()
        assert str(info.value).count('not initialized') <= 1
        call()  # 'auto' runs the reference


@pytest.mark.parametrize('aggr', ['mean', 'max', 'min', ['mean', 'max']])
@pytest.mark.parametrize('flow', ['source_to_target', 'target_to_source'])
def test_masked_input_loops_are_not_aggregated(aggr, flow):
    # Under add_self_loops the input's loops are replaced by fresh ones: as
    # for GATv2Conv (which removes them), the output is the one without
    # them, with an aggregation that would count (mean) or compare (max,
    # min) their zero messages too.
    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, 5)
    conv = GATEConv(5, 4, heads=2, aggr=aggr, flow=flow)
    randomize_attention(conv)
    want = conv(x, EDGE_INDEX[:, ~LOOP])
    out, (ei, alpha) = conv(x, EDGE_INDEX, return_attention_weights=True)
    torch.testing.assert_close(out, want)
    assert torch.equal(ei[:, : LOOP.numel()], EDGE_INDEX)  # still listed
    assert alpha[: LOOP.numel()][LOOP].abs().sum() == 0
    out.sum().backward()  # (differentiable)
    # The mean is GATv2Conv's with the same parameters (a_s = a_t):
    if aggr == 'mean' and flow == 'source_to_target':
        gatv2 = GATv2Conv(5, 4, heads=2, aggr='mean', negative_slope=0.0)
        with torch.no_grad():
            gatv2.lin_l.weight.copy_(conv.lin.weight)
            gatv2.lin_l.bias.zero_()
            gatv2.lin_r.bias.zero_()
            conv.lin_src.weight.copy_(conv.lin.weight)
            conv.lin_dst.weight.copy_(gatv2.lin_r.weight)
            conv.att_self.copy_(conv.att_neighbor)
            gatv2.att.copy_(conv.att_neighbor)
            gatv2.bias.copy_(conv.bias)
        torch.testing.assert_close(conv(x, EDGE_INDEX), gatv2(x, EDGE_INDEX))


@pytest.mark.parametrize('add_self_loops', [True, False])
@pytest.mark.parametrize('bipartite', [False, True])
def test_edge_index_input_returns_edge_index_weights(
    add_self_loops, bipartite
):
    # As GATv2Conv: an EdgeIndex in, an EdgeIndex of the edges used out
    # (appended loops included), of the input's sparse size.
    from torch_geometric import EdgeIndex

    num_dst = 4 if bipartite else NUM_NODES
    x_src = torch.randn(NUM_NODES, 5)
    x = (x_src, torch.randn(num_dst, 5)) if bipartite else x_src
    plain = EDGE_INDEX[:, EDGE_INDEX[1] < num_dst]
    edge_index = EdgeIndex(plain, sparse_size=(NUM_NODES, num_dst))
    conv = GATEConv(5, 4, heads=2, add_self_loops=add_self_loops)
    randomize_attention(conv)
    want_out, (want_ei, want_alpha) = conv(
        x, plain, return_attention_weights=True
    )
    out, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
    assert isinstance(ei, EdgeIndex)
    assert ei.sparse_size() == (NUM_NODES, num_dst)
    assert torch.equal(ei.as_tensor(), want_ei)
    torch.testing.assert_close(alpha, want_alpha)
    torch.testing.assert_close(out, want_out)
    gatv2 = GATv2Conv(5, 4, heads=2, add_self_loops=add_self_loops)
    _, (gatv2_ei, _) = gatv2(x, edge_index, return_attention_weights=True)
    assert type(ei) is type(gatv2_ei)
