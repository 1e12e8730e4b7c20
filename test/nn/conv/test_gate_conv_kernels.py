r"""The seam: PyG's GATEConv (gate_conv.py, the file PyG merges) and
torch_geometric_gate.GATEConv, the same layer with its attention step on the
kernels."""

import ast
import io
import warnings
from pathlib import Path

import pytest
import torch
from conv_testing import (
    EDGE_INDEX,
    NUM_NODES,
    kernel_device,
    randomize_attention,
)
from torch import Tensor
from torch_geometric.nn import GATv2Conv

from torch_geometric_gate import GATEConv, attention_kernel
from torch_geometric_gate.nn.conv import gate_conv

UPSTREAM = Path(gate_conv.__file__)


def test_upstream_layer_imports_torch_and_pyg_only():
    tree = ast.parse(UPSTREAM.read_text())
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split('.')[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module.split('.')[0])
    assert modules == {'typing', 'torch', 'torch_geometric'}
    assert 'torch_geometric_gate' not in UPSTREAM.read_text()


def test_the_kernel_layer_is_the_upstream_layer():
    assert issubclass(GATEConv, gate_conv.GATEConv)
    assert GATEConv is not gate_conv.GATEConv
    # A class name of its own, so that PyG's Inspector (which caches class
    # sources by name) reads the base's type comments, unrebuilt:
    assert GATEConv.__name__ == 'KernelGATEConv'
    assert repr(GATEConv(5, 4, heads=2)) == 'GATEConv(5, 4, heads=2)'
    assert 'propagate_type' not in vars(GATEConv)
    assert 'edge_updater_type' not in vars(GATEConv)
    # It overrides the attention step and the projections (one product)
    # alone, besides the entry points that check the inputs (below; PyG
    # adds its generated
    # propagate/edge_updater to each class):
    generated = {
        'propagate', 'collect', 'edge_updater', 'edge_collect',
        '_orig_propagate', '_jinja_propagate', '_orig_edge_updater',
        '_jinja_edge_updater',
    }  # fmt: skip
    overridden = {
        name
        for name in vars(GATEConv)
        if name in vars(gate_conv.GATEConv) and not name.startswith('__')
    }
    # The attention step, the projections, and the entry points that run
    # the package's checks first (in Python) and then the base's:
    assert overridden - generated == {'_attention', '_project', 'forward'}
    assert GATEConv.forward.__doc__ == gate_conv.GATEConv.forward.__doc__


def test_the_package_checks_come_with_the_exported_class():
    # The upstream file checks at PyG's level (GATv2Conv's, plus what GATE
    # needs); the messages that name the problem are the package's:
    upstream = gate_conv.GATEConv(5, 4, heads=0)  # As GATv2Conv: no check.
    assert upstream.heads == 0
    with pytest.raises(ValueError, match="'heads' must be a positive int"):
        GATEConv(5, 4, heads=0)
    x = torch.randn(NUM_NODES, 5)
    with pytest.raises(ValueError, match="'edge_index' of integers"):
        GATEConv(5, 4)(x, EDGE_INDEX.float())
    # The upstream layer refuses it as GATv2Conv does (PyG's message):
    for cls in (gate_conv.GATEConv, GATv2Conv):
        for add_self_loops in (True, False):
            conv = cls(5, 4, add_self_loops=add_self_loops)
            with pytest.raises(ValueError, match='to be of integer type'):
                conv(x, EDGE_INDEX.float())
    # What the layer needs to be correct, both classes refuse:
    for cls in (gate_conv.GATEConv, GATEConv):
        with pytest.raises(ValueError, match='as many source as target'):
            cls((5, 3), 4, share_weights=True)
        with pytest.raises(ValueError, match="'decomposed_layers > 1'"):
            cls(5, 4, decomposed_layers=2)
        with pytest.raises(ValueError, match="with 'edge_dim'"):
            cls(5, 4)(x, EDGE_INDEX, torch.randn(EDGE_INDEX.size(1), 2))


def _pair(**kwargs):
    torch.manual_seed(0)
    ours = GATEConv(5, 4, heads=2, **kwargs).double()
    randomize_attention(ours)
    upstream = gate_conv.GATEConv(5, 4, heads=2, **kwargs).double()
    return ours, upstream


@pytest.mark.parametrize(
    'kwargs',
    [
        {},
        {'edge_dim': 3, 'residual': True},
        {'share_weights': True, 'concat': False},
    ],
)
def test_checkpoints_are_interchangeable(kwargs):
    ours, upstream = _pair(**kwargs)
    upstream.load_state_dict(ours.state_dict())
    x = torch.randn(NUM_NODES, 5, dtype=torch.double)
    edge_attr = None
    if 'edge_dim' in kwargs:
        edge_attr = torch.randn(EDGE_INDEX.size(1), 3, dtype=torch.double)
    outputs, grads = [], []
    for conv in (ours, upstream):
        out = conv(x, EDGE_INDEX, edge_attr)
        out.pow(2).sum().backward()
        outputs.append(out)
        grads.append({n: p.grad for n, p in conv.named_parameters()})
    assert torch.allclose(outputs[0], outputs[1], atol=1e-12)
    for name, grad in grads[0].items():
        assert torch.allclose(grad, grads[1][name], atol=1e-10), name
    ours.reset_parameters()
    ours.load_state_dict(upstream.state_dict())
    assert torch.allclose(ours(x, EDGE_INDEX, edge_attr), outputs[1])


class _Model(torch.nn.Module):
    def __init__(self, conv: torch.nn.Module):
        super().__init__()
        self.convs = torch.nn.ModuleList([conv])

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        for conv in self.convs:
            x = conv(x, edge_index)
        return x


def test_both_classes_script_and_scripting_leaves_the_model_alone():
    ours, upstream = _pair()
    upstream.load_state_dict(ours.state_dict())
    x = torch.randn(NUM_NODES, 5, dtype=torch.double)
    expected = upstream(x, EDGE_INDEX)
    model = _Model(ours)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        scripted = [torch.jit.script(m) for m in (upstream, ours, model)]
    buffer = io.BytesIO()
    torch.jit.save(scripted[2], buffer)
    buffer.seek(0)
    scripted.append(torch.jit.load(buffer))
    for jit in scripted:
        assert torch.allclose(jit(x, EDGE_INDEX), expected, atol=1e-12)
    # The eager model still holds (and runs) the kernel layer:
    assert type(model.convs[0]) is GATEConv


def test_a_subclass_overrides_the_step_alone():
    # The step is the one place that computes attention: what it returns
    # is what forward returns, on every path.
    class Uniform(gate_conv.GATEConv):
        def _attention(
            self,
            edge_index,
            x,
            value,
            edge_attr,
            loop,
            size,
            need_weights,
            input_edge_index,
        ):
            out, alpha = super()._attention(
                edge_index,
                x,
                value,
                edge_attr,
                loop,
                size,
                need_weights,
                input_edge_index,
            )
            return torch.zeros_like(out), torch.ones_like(alpha)

    conv = Uniform(5, 4, heads=2)
    x = torch.randn(NUM_NODES, 5)
    out, (ei, alpha) = conv(x, EDGE_INDEX, return_attention_weights=True)
    assert torch.equal(out, conv.bias.expand_as(out))
    assert torch.equal(alpha, torch.ones(ei.size(1), 2))


@pytest.mark.parametrize('kernel', ['auto', 'reference'])
def test_forward_with_attention_is_the_dense_attention(kernel):
    ours, _ = _pair()
    x = torch.randn(NUM_NODES, 5, dtype=torch.double)
    with attention_kernel(kernel):
        out, (ei, alpha) = ours(x, EDGE_INDEX, return_attention_weights=True)
        out2, (ei2, alpha2) = ours.forward_with_attention(x, EDGE_INDEX)
    assert torch.equal(out, out2) and torch.equal(ei, ei2)
    assert torch.equal(alpha, alpha2)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        jit = torch.jit.script(ours)
    out3, (ei3, alpha3) = jit.forward_with_attention(x, EDGE_INDEX)
    assert torch.allclose(out3, out, atol=1e-12) and torch.equal(ei3, ei)
    assert torch.allclose(alpha3, alpha, atol=1e-12)


def test_forward_with_attention_is_dense_for_any_adjacency():
    # The edge-index form for a sparse adjacency too (whose own form,
    # return_attention_weights=True, is a sparse matrix of its layout):
    from torch_geometric.utils import to_torch_csc_tensor

    ours, _ = _pair()
    x = torch.randn(NUM_NODES, 5, dtype=torch.double)
    edge_index = EDGE_INDEX[:, 1:]  # (A sparse matrix merges duplicates.)
    out, (ei, alpha) = ours(x, edge_index, return_attention_weights=True)

    def dense(ei: Tensor, alpha: Tensor) -> Tensor:
        shape = (NUM_NODES, NUM_NODES, 2)
        zeros = torch.zeros(shape, dtype=alpha.dtype)
        return zeros.index_put_((ei[1], ei[0]), alpha, True)

    adj = to_torch_csc_tensor(edge_index, size=(NUM_NODES, NUM_NODES))
    got_out, (got_ei, got_alpha) = ours.forward_with_attention(x, adj.t())
    assert got_ei.size(1) == ei.size(1)
    assert torch.allclose(got_out, out, atol=1e-12)
    assert torch.allclose(dense(got_ei, got_alpha), dense(ei, alpha))


def test_the_upstream_layer_adds_no_public_method():
    # PyG's convs have forward() alone; the package's class adds two.
    from torch_geometric.nn.conv import GATv2Conv as Conv

    # PyG sets 'collect' and 'edge_collect' on a class it scripts, so they
    # came and went with the tests run before this one (after one that
    # scripts a GATEConv and no GATv2Conv, as under -k or xdist, it failed):
    jit_set = {'collect', 'edge_collect'}

    def public(cls):
        return {n for n in dir(cls) if not n.startswith('_')} - jit_set

    assert public(gate_conv.GATEConv) - public(Conv) == set()
    assert public(GATEConv) - public(Conv) == {
        'forward_with_attention',
        'forward_with_self_attention',
    }


@pytest.mark.parametrize('add_self_loops', [True, False])
def test_compile_traces_the_chunked_kernels_as_the_reference_computes(
    add_self_loops,
):
    # Under torch.compile 'auto' keeps the chunked kernels (custom ops that
    # Dynamo traces, no graph break), and the compiled layer's output and
    # every gradient equal the reference's (float64).
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, 5, dtype=torch.float64)
    conv = GATEConv(5, 4, heads=2, add_self_loops=add_self_loops).double()
    randomize_attention(conv)
    compiled = torch.compile(conv, backend=backend, fullgraph=True)
    results = []
    for run, kernel in ((compiled, 'auto'), (conv, 'reference')):
        conv.zero_grad()
        with attention_kernel(kernel):
            out = run(x, EDGE_INDEX)
        (out**2).sum().backward()
        results.append([out] + [p.grad.clone() for p in conv.parameters()])
    assert len(graphs) == 1
    targets = {str(node.target) for node in graphs[0].graph.nodes}
    assert 'torch_geometric_gate.chunked_attention' in targets
    for got, expected in zip(*results):
        assert torch.allclose(got, expected, atol=1e-10)


@pytest.mark.parametrize('kernel', ['reference', 'chunked', 'triton'])
@pytest.mark.parametrize('add_self_loops', [True, False])
@pytest.mark.parametrize('sort', [None, 'col'])
def test_an_edge_index_input_is_the_plain_tensor_on_every_kernel(
    kernel, add_self_loops, sort
):
    # Without appended loops the kernels took the input EdgeIndex's rows
    # as they are (Index tensors, which Triton cannot read).
    from torch_geometric import EdgeIndex

    if kernel == 'triton':
        pytest.importorskip('triton')
    torch.manual_seed(0)
    device = kernel_device(kernel)
    conv = GATEConv(5, 4, heads=2, add_self_loops=add_self_loops).to(device)
    randomize_attention(conv)
    x = torch.randn(NUM_NODES, 5, device=device, requires_grad=True)
    ei = EDGE_INDEX.to(device)
    ei = EdgeIndex(ei, sparse_size=(NUM_NODES, NUM_NODES))
    if sort is not None:
        ei = ei.sort_by(sort)[0]
    plain = ei.as_tensor()
    with attention_kernel(kernel):
        got, (_, got_alpha) = conv(x, ei, return_attention_weights=True)
        want, (_, alpha) = conv(x, plain, return_attention_weights=True)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_alpha, alpha)
    (grad,) = torch.autograd.grad(got.square().sum(), x)
    (want_grad,) = torch.autograd.grad(want.square().sum(), x)
    torch.testing.assert_close(grad, want_grad)


@pytest.mark.parametrize('add_self_loops', [True, False])
def test_forward_with_attention_keeps_an_edge_index_s_size(add_self_loops):
    # With an EdgeIndex and appended self-loops, forward_with_attention
    # returned a plain tensor (forward an EdgeIndex of the input's size):
    # self_loop_attention of its weights had a row per node up to the
    # largest index, 3 here, not one per target node, 6.
    from torch_geometric import EdgeIndex

    from torch_geometric_gate.utils import self_loop_attention

    torch.manual_seed(0)
    x = (torch.randn(3, 5), torch.randn(6, 5))
    edge_index = EdgeIndex(
        torch.tensor([[0, 1, 2, 2], [1, 2, 0, 2]]), sparse_size=(3, 6)
    )
    conv = GATEConv(5, 4, heads=2, add_self_loops=add_self_loops)
    randomize_attention(conv)
    _, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
    _, (got_ei, got_alpha) = conv.forward_with_attention(x, edge_index)
    assert isinstance(got_ei, EdgeIndex)
    assert got_ei.sparse_size() == ei.sparse_size() == (3, 6)
    assert torch.equal(got_ei.as_tensor(), ei.as_tensor())
    assert torch.equal(got_alpha, alpha)
    _, alpha_vv = conv.forward_with_self_attention(x, edge_index)
    got = self_loop_attention(got_ei, got_alpha)
    assert got.shape == alpha_vv.shape == (6, 2)
    if add_self_loops:
        assert torch.allclose(got, alpha_vv)
    else:  # Bipartite without add_self_loops: no edge is a self-loop.
        assert torch.equal(alpha_vv, torch.zeros(6, 2))
