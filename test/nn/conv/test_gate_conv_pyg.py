r"""GATEConv with PyG's own tools: explainers, lazy edge features, the return
type of :obj:`forward`, autocast.
"""

import pytest
import torch
from conv_testing import NUM_NODES, randomize_attention
from torch import Tensor
from torch_geometric.explain import (
    AttentionExplainer,
    Explainer,
    GNNExplainer,
)
from torch_geometric.explain.algorithm.utils import clear_masks, set_masks
from torch_geometric.nn import GATv2Conv, to_hetero
from torch_geometric.utils import scatter, to_torch_sparse_tensor

from torch_geometric_gate import GATEConv

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
    for edge_index in [EDGE_INDEX, adj_t]:
        # As GATv2Conv since PyG 2.8:
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
    assert not conv._fusable()
    conv(x, EDGE_INDEX).sum().backward()
    assert torch.isfinite(x.grad).all()
    assert conv.att_self.grad is not None
