import itertools
import math
import re
from typing import List, Tuple

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conv_testing import (
    EDGE_INDEX,
    NUM_NODES,
    kernel_device,
    randomize_attention,
)
from torch import Tensor
from torch.func import functional_call
from torch_geometric.nn import GATv2Conv
from torch_geometric.testing import withPackage
from torch_geometric.typing import SparseTensor
from torch_geometric.utils import to_torch_sparse_tensor

from torch_geometric_gate import GATEConv
from torch_geometric_gate.utils import self_loop_attention


def dense_gate(
    conv: GATEConv,
    x_src: Tensor,
    x_dst: Tensor,
    edge_index: Tensor,
    edge_attr: Tensor = None,
) -> Tuple[Tensor, List[List[Tuple[int, float]]]]:
    r"""Evaluates Eq. (1), (2), (4) of the paper edge by edge, independently
    of the layer's message passing. Returns the output and, per target node,
    the list of (source, alpha) over the edges the node attends to.
    """
    H, C = conv.heads, conv.out_channels
    num_src, num_dst = x_src.size(0), x_dst.size(0)
    W = conv.lin.weight.view(H, C, -1)
    U = (conv.lin_src or conv.lin).weight.view(H, C, -1)
    V = (conv.lin_dst or conv.lin).weight.view(H, C, -1)
    a_s = conv.att_neighbor.view(H, C)
    a_t = conv.att_self.view(H, C)

    edges = [(int(u), int(v), k) for k, (u, v) in enumerate(edge_index.t())]
    attrs = {}
    if edge_attr is not None:
        attrs = {k: edge_attr[k] for k in range(len(edges))}
    if conv.add_self_loops:
        edges = [(u, v, k) for u, v, k in edges if u != v]
        for v in range(min(num_src, num_dst)):
            if edge_attr is not None:  # fill_value='mean' over in-edges
                incoming = [attrs[k] for u, w, k in edges if w == v]
                attrs[('loop', v)] = (
                    torch.stack(incoming).mean(0)
                    if incoming
                    else torch.zeros_like(edge_attr[0])
                )
            edges.append((v, v, ('loop', v)))

    out = torch.zeros(num_dst, H, C, dtype=x_src.dtype)
    attention = []
    for v in range(num_dst):
        incoming = [(u, k) for u, w, k in edges if w == v]
        rows = []
        if incoming:
            scores = []
            for u, k in incoming:
                z = U @ x_src[u] + V @ x_dst[v]  # [H, C]
                if edge_attr is not None:
                    z = z + (conv.lin_edge.weight @ attrs[k]).view(H, C)
                z = F.leaky_relu(z, conv.negative_slope)
                # Source i is target i only in a homogeneous graph, or
                # with add_self_loops=True (PyG's bipartite convention):
                loop = u == v and (x_src is x_dst or conv.add_self_loops)
                a = a_t if loop else a_s
                scores.append((a * z).sum(-1))  # [H]
            alpha = torch.softmax(torch.stack(scores), dim=0)  # [deg, H]
            for (u, _), a_uv in zip(incoming, alpha):
                out[v] += a_uv.view(H, 1) * (W @ x_src[u])
                rows.append((u, a_uv))
        attention.append(rows)
    out = out.view(num_dst, H * C) if conv.concat else out.mean(1)
    if conv.bias is not None:
        out = out + conv.bias
    return out, attention


@pytest.mark.parametrize(
    'heads,concat,add_self_loops,share_weights,bipartite',
    list(
        itertools.product(
            [1, 3], [True, False], [True, False], [False, True], [False, True]
        )
    ),
)
def test_gate_conv_matches_dense_equations(
    heads, concat, add_self_loops, share_weights, bipartite
):
    torch.manual_seed(heads + 2 * concat + 4 * add_self_loops)
    x = torch.randn(NUM_NODES, 5)
    if bipartite:
        x_dst = torch.randn(4, 5)
        edge_index = EDGE_INDEX[:, EDGE_INDEX[1] < 4]
        inp = (x, x_dst)
    else:
        x_dst = x
        edge_index = EDGE_INDEX
        inp = x
    conv = GATEConv(
        5,
        4,
        heads=heads,
        concat=concat,
        add_self_loops=add_self_loops,
        share_weights=share_weights,
    )
    randomize_attention(conv)

    out, (ei, alpha) = conv(inp, edge_index, return_attention_weights=True)
    expected, attention = dense_gate(conv, x, x_dst, edge_index)
    assert out.shape == (x_dst.size(0), heads * 4 if concat else 4)
    assert torch.allclose(out, expected, atol=1e-5)

    # Every edge the softmax saw carries the dense reference's weight, and
    # masked input self-loops carry exactly zero:
    for v, rows in enumerate(attention):
        got = alpha[ei[1] == v]
        srcs = ei[0, ei[1] == v]
        total = sum((a_uv for _, a_uv in rows), torch.zeros(alpha.size(1)))
        assert torch.allclose(got.sum(0), total, atol=1e-6)
        for u in {u for u, _ in rows}:
            assert torch.allclose(
                got[srcs == u].sum(0),
                sum(a for w, a in rows if w == u),
                atol=1e-6,
            )

    if add_self_loops:
        num_input = edge_index.size(1)
        num_loops = min(x.size(0), x_dst.size(0))
        assert ei.size(1) == num_input + num_loops
        assert torch.equal(
            ei[:, num_input:], torch.arange(num_loops).repeat(2, 1)
        )
        input_loops = edge_index[0] == edge_index[1]
        assert bool((alpha[:num_input][input_loops] == 0).all())
    else:
        assert torch.equal(ei, edge_index)


def test_gate_conv_edge_attr_matches_dense_equations():
    torch.manual_seed(1)
    x = torch.randn(NUM_NODES, 5)
    edge_attr = torch.randn(EDGE_INDEX.size(1), 3)
    conv = GATEConv(5, 4, heads=2, edge_dim=3)
    randomize_attention(conv)
    out = conv(x, EDGE_INDEX, edge_attr)
    expected, _ = dense_gate(conv, x, x, EDGE_INDEX, edge_attr)
    assert torch.allclose(out, expected, atol=1e-5)

    # A one-dimensional edge feature is read as [num_edges, 1]:
    conv = GATEConv(5, 4, edge_dim=1)
    edge_weight = torch.rand(EDGE_INDEX.size(1))
    assert torch.allclose(
        conv(x, EDGE_INDEX, edge_weight),
        conv(x, EDGE_INDEX, edge_weight.view(-1, 1)),
    )


@pytest.mark.parametrize('in_channels', [5, 32])
def test_gate_conv_projections_match_dense_equations_and_gradients(
    in_channels,
):
    # Narrower and wider inputs than heads * out_channels = 6: one product
    # of the stacked weights, whose three [N, H, C] views (no copies) are
    # the three projections.
    torch.manual_seed(in_channels)
    conv = GATEConv(in_channels, 3, heads=2).double()
    randomize_attention(conv)
    x = torch.randn(
        NUM_NODES, in_channels, dtype=torch.double, requires_grad=True
    )
    parts = conv._project(x, x, False)
    linears = (conv.lin, conv.lin_src, conv.lin_dst)
    for part, lin in zip(parts, linears):
        assert part.shape == (NUM_NODES, 2, 3)
        assert part._base is parts[0]._base is not None
        assert torch.allclose(part.reshape(NUM_NODES, 6), x @ lin.weight.t())
    out = conv(x, EDGE_INDEX)
    expected, _ = dense_gate(conv, x, x, EDGE_INDEX)
    assert torch.allclose(out, expected)
    inputs = [conv.lin.weight, conv.lin_src.weight, conv.lin_dst.weight, x]
    weight = torch.randn_like(out)
    grads = torch.autograd.grad((out * weight).sum(), inputs)
    dense = torch.autograd.grad((expected * weight).sum(), inputs)
    for got, want in zip(grads, dense):
        assert torch.allclose(got, want)


def test_gate_conv_lazy_target_side_is_set_before_one_product():
    # With `in_channels=(16, -1)` the target projection is lazy: the first
    # call takes three products (which set it), later ones the one product
    # of the stacked weights; both equal the dense equations.
    torch.manual_seed(0)
    conv = GATEConv((16, -1), 3, heads=2).double()
    randomize_attention(conv)
    x = torch.randn(NUM_NODES, 16, dtype=torch.double)
    first = conv(x, EDGE_INDEX)
    expected, _ = dense_gate(conv, x, x, EDGE_INDEX)
    assert torch.allclose(first, expected)
    assert torch.allclose(conv(x, EDGE_INDEX), expected)


@pytest.mark.parametrize('concat', [True, False])
@pytest.mark.parametrize(
    'edge_dim,fill_value',
    [
        (None, 'mean'),
        (3, 'mean'),
        (3, 'add'),
        (3, 'max'),
        (3, 'min'),
        (3, 0.5),
    ],
)
def test_gate_conv_reduces_to_gatv2(concat, edge_dim, fill_value):
    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, 5)
    edge_attr = None
    if edge_dim is not None:
        edge_attr = torch.randn(EDGE_INDEX.size(1), edge_dim)
    gatv2 = GATv2Conv(
        5,
        4,
        heads=2,
        concat=concat,
        edge_dim=edge_dim,
        fill_value=fill_value,
        residual=True,
    )
    gate = GATEConv(
        5,
        4,
        heads=2,
        concat=concat,
        negative_slope=0.2,
        edge_dim=edge_dim,
        fill_value=fill_value,
        residual=True,
    )
    with torch.no_grad():
        gatv2.lin_l.bias.zero_()  # GATE's matrices carry no bias.
        gatv2.lin_r.bias.zero_()
        gatv2.bias.normal_()
        gate.lin.weight.copy_(gatv2.lin_l.weight)
        gate.lin_src.weight.copy_(gatv2.lin_l.weight)
        gate.lin_dst.weight.copy_(gatv2.lin_r.weight)
        gate.att_neighbor.copy_(gatv2.att)
        gate.att_self.copy_(gatv2.att)
        gate.bias.copy_(gatv2.bias)
        gate.res.weight.copy_(gatv2.res.weight)
        if edge_dim is not None:
            gate.lin_edge.weight.copy_(gatv2.lin_edge.weight)

    out1, (ei1, alpha1) = gatv2(
        x, EDGE_INDEX, edge_attr, return_attention_weights=True
    )
    out2, (ei2, alpha2) = gate(
        x, EDGE_INDEX, edge_attr, return_attention_weights=True
    )
    assert torch.allclose(out1, out2, atol=1e-6)
    # Same attention per edge, once the masked input loop is left out:
    keep = alpha2.sum(1) > 0
    key1 = sorted(zip(ei1.t().tolist(), alpha1.tolist()))
    key2 = sorted(zip(ei2[:, keep].t().tolist(), alpha2[keep].tolist()))
    assert [k for k, _ in key1] == [k for k, _ in key2]
    assert torch.allclose(
        torch.tensor([a for _, a in key1]),
        torch.tensor([a for _, a in key2]),
        atol=1e-6,
    )


def test_gate_conv_self_loop_semantics():
    x = torch.randn(NUM_NODES, 5)
    conv = GATEConv(5, 4, add_self_loops=True)

    # Zero attention: uniform weights over the in-edges and the one loop.
    # An input loop is not counted twice:
    out, (ei, alpha) = conv(x, EDGE_INDEX, return_attention_weights=True)
    alpha_vv = self_loop_attention(ei, alpha, NUM_NODES)
    deg = torch.zeros(NUM_NODES)
    no_loops = EDGE_INDEX[:, EDGE_INDEX[0] != EDGE_INDEX[1]]
    deg.index_add_(0, no_loops[1], torch.ones(no_loops.size(1)))
    assert torch.allclose(alpha_vv.view(-1), 1.0 / (deg + 1.0))

    # A large a_t switches aggregation off, a large a_s switches the node's
    # own features off (ReLU keeps the scores' sign):
    with torch.no_grad():
        conv.lin_src.weight.abs_()
        conv.lin_dst.weight.abs_()
    x_pos = x.abs()
    with torch.no_grad():
        conv.att_self.fill_(50.0)
    out, (ei, alpha) = conv(x_pos, EDGE_INDEX, return_attention_weights=True)
    assert torch.allclose(
        self_loop_attention(ei, alpha), torch.ones(NUM_NODES, 1), atol=1e-4
    )
    assert torch.allclose(out, conv.lin(x_pos) + conv.bias, atol=1e-4)
    with torch.no_grad():
        conv.att_self.fill_(-50.0)
    out, (ei, alpha) = conv(x_pos, EDGE_INDEX, return_attention_weights=True)
    alpha_vv = self_loop_attention(ei, alpha).view(-1)
    assert torch.allclose(alpha_vv[deg > 0], torch.zeros(1), atol=1e-4)
    assert torch.allclose(alpha_vv[deg == 0], torch.ones(1))  # nothing else

    # Without added loops, only given loops carry self-attention, scored
    # with a_t:
    conv = GATEConv(5, 4, add_self_loops=False)
    with torch.no_grad():
        conv.lin_src.weight.abs_()
        conv.lin_dst.weight.abs_()
        conv.att_self.fill_(50.0)
    out, (ei, alpha) = conv(x_pos, EDGE_INDEX, return_attention_weights=True)
    assert torch.equal(ei, EDGE_INDEX)
    alpha_vv = self_loop_attention(ei, alpha, NUM_NODES).view(-1)
    assert torch.allclose(
        alpha_vv, torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0, 0.0]), atol=1e-4
    )


def test_gate_conv_sparse_inputs():
    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, 5)
    edge_index = EDGE_INDEX[:, [0, 2, 3, 4, 5, 6, 7]]  # no duplicates
    for add_self_loops in [True, False]:
        conv = GATEConv(5, 4, heads=2, add_self_loops=add_self_loops)
        randomize_attention(conv)
        out, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
        dense = torch.zeros(NUM_NODES, NUM_NODES, 2)
        dense[ei[1], ei[0]] += alpha
        for layout in [torch.sparse_coo, torch.sparse_csr, torch.sparse_csc]:
            adj_t = to_torch_sparse_tensor(
                edge_index.flip(0), layout=layout, size=(NUM_NODES, NUM_NODES)
            )
            out_sparse, (adj, values) = conv(
                x, adj_t, return_attention_weights=True
            )
            assert torch.allclose(out_sparse, out, atol=1e-6)
            assert adj.layout == layout
            assert adj.size() == (NUM_NODES, NUM_NODES, 2)
            assert torch.allclose(adj.to_dense(), dense, atol=1e-6)
            assert torch.allclose(
                self_loop_attention(adj),
                self_loop_attention(ei, alpha, NUM_NODES),
                atol=1e-6,
            )
            assert values.size(1) == 2

        # Bipartite sparse input:
        x_dst = torch.randn(4, 5)
        ei_b = edge_index[:, edge_index[1] < 4]
        adj_t = to_torch_sparse_tensor(ei_b.flip(0), size=(4, NUM_NODES))
        assert torch.allclose(
            conv((x, x_dst), adj_t), conv((x, x_dst), ei_b), atol=1e-6
        )


def test_gate_conv_sparse_inputs_edge_attr_order():
    # `edge_attr` of sparse input follows the coalesced order (by target,
    # then source) in every layout, CSC and uncoalesced COO included:
    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, 5)
    edge_index = EDGE_INDEX[:, [0, 2, 3, 4, 5, 6, 7]]  # no duplicates
    edge_attr = torch.randn(edge_index.size(1), 3)
    src, dst = edge_index.tolist()
    perm = sorted(range(len(src)), key=lambda k: (dst[k], src[k]))
    for add_self_loops in [True, False]:
        conv = GATEConv(
            5, 4, heads=2, edge_dim=3, add_self_loops=add_self_loops
        )
        randomize_attention(conv)
        out, (ei, alpha) = conv(
            x, edge_index, edge_attr, return_attention_weights=True
        )
        dense = torch.zeros(NUM_NODES, NUM_NODES, 2)
        dense[ei[1], ei[0]] += alpha
        uncoalesced = torch.sparse_coo_tensor(
            edge_index.flip(0),
            torch.ones(edge_index.size(1)),
            (NUM_NODES, NUM_NODES),
        )
        adjs = [uncoalesced] + [
            to_torch_sparse_tensor(
                edge_index.flip(0), layout=layout, size=(NUM_NODES, NUM_NODES)
            )
            for layout in [
                torch.sparse_coo,
                torch.sparse_csr,
                torch.sparse_csc,
            ]
        ]
        for adj_t in adjs:
            out_sparse, (adj, _) = conv(
                x, adj_t, edge_attr[perm], return_attention_weights=True
            )
            assert torch.allclose(out_sparse, out, atol=1e-6), adj_t.layout
            assert adj.layout == adj_t.layout
            assert torch.allclose(adj.to_dense(), dense, atol=1e-6)
        assert not uncoalesced.is_coalesced()  # the input is left as it was


@withPackage('torch_sparse')
def test_gate_conv_sparse_tensor():  # pragma: no cover
    x = torch.randn(NUM_NODES, 5)
    edge_index = EDGE_INDEX[:, [0, 2, 3, 4, 5, 6, 7]]  # with a loop (2, 2)
    adj = SparseTensor.from_edge_index(
        edge_index, sparse_sizes=(NUM_NODES, NUM_NODES)
    )
    for add_self_loops in [True, False]:
        conv = GATEConv(5, 4, heads=2, add_self_loops=add_self_loops)
        randomize_attention(conv)
        out, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
        assert torch.allclose(conv(x, adj.t()), out, atol=1e-6)
        out2, adj_alpha = conv(x, adj.t(), return_attention_weights=True)
        assert torch.allclose(out2, out, atol=1e-6)
        assert adj_alpha.sizes() == [NUM_NODES, NUM_NODES, 2]
        dense = torch.zeros(NUM_NODES, NUM_NODES, 2)
        dense[ei[1], ei[0]] += alpha
        assert torch.allclose(adj_alpha.to_dense(), dense, atol=1e-6)
        assert torch.allclose(
            self_loop_attention(adj_alpha),
            self_loop_attention(ei, alpha, NUM_NODES),
            atol=1e-6,
        )
        jit = torch.jit.script(conv)
        assert torch.allclose(jit(x, adj.t()), out, atol=1e-6)


@withPackage('torch_sparse')
def test_gate_conv_sparse_tensor_edge_attr_order():  # pragma: no cover
    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, 5)
    edge_index = EDGE_INDEX[:, [0, 2, 3, 4, 5, 6, 7]]
    edge_attr = torch.randn(edge_index.size(1), 3)
    src, dst = edge_index.tolist()
    perm = sorted(range(len(src)), key=lambda k: (dst[k], src[k]))
    adj_t = SparseTensor.from_edge_index(
        edge_index.flip(0), sparse_sizes=(NUM_NODES, NUM_NODES)
    )
    for add_self_loops in [True, False]:
        conv = GATEConv(
            5, 4, heads=2, edge_dim=3, add_self_loops=add_self_loops
        )
        randomize_attention(conv)
        out = conv(x, edge_index, edge_attr)
        assert torch.allclose(conv(x, adj_t, edge_attr[perm]), out, atol=1e-6)


class UserModel(torch.nn.Module):
    r"""A user's model holding GATEConv layers, to be scripted whole."""

    def __init__(self):
        super().__init__()
        self.conv1 = GATEConv(5, 8, heads=2)
        self.conv2 = GATEConv(16, 3, add_self_loops=False)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


def test_gate_conv_torchscript():
    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, 5)
    x_dst = torch.randn(4, 5)
    ei_b = EDGE_INDEX[:, EDGE_INDEX[1] < 4]
    for kwargs in [
        {},
        dict(add_self_loops=False),
        dict(share_weights=True),
        dict(edge_dim=2, concat=False, residual=True),
    ]:
        conv = GATEConv(5, 4, heads=2, **kwargs)
        randomize_attention(conv)
        edge_attr = (
            torch.randn(EDGE_INDEX.size(1), 2) if conv.edge_dim else None
        )
        jit = torch.jit.script(conv)
        out = conv(x, EDGE_INDEX, edge_attr)
        assert torch.allclose(jit(x, EDGE_INDEX, edge_attr), out)
        if edge_attr is None:  # bipartite and torch.sparse input:
            assert torch.allclose(
                jit((x, x_dst), ei_b), conv((x, x_dst), ei_b)
            )
            adj_t = to_torch_sparse_tensor(
                EDGE_INDEX.flip(0), size=(NUM_NODES, NUM_NODES)
            )
            assert torch.allclose(jit(x, adj_t), conv(x, adj_t), atol=1e-6)

    with pytest.raises(torch.jit.Error, match='not supported under Torch'):
        jit(x, EDGE_INDEX, edge_attr, return_attention_weights=True)

    model = UserModel()
    jit = torch.jit.script(model)
    assert torch.allclose(jit(x, EDGE_INDEX), model(x, EDGE_INDEX))


def test_gate_conv_torchscript_without_torch_sparse(tmp_path):
    # Most installs have no torch-sparse: PyG's typing module then holds a
    # stand-in `SparseTensor` (without `sparse_sizes()`), which TorchScript
    # compiles the layer against. CI has torch-sparse, so the scripted tests
    # run again in a process where importing it (and torch-scatter) fails:
    import os
    import subprocess
    import sys

    for name in ('torch_sparse', 'torch_scatter'):
        (tmp_path / name).mkdir()
        (tmp_path / name / '__init__.py').write_text(
            f"raise ImportError('{name} is hidden for this test')\n"
        )
    path = [str(tmp_path), os.environ.get('PYTHONPATH', '')]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    test = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    # One process: PyG's view of the extras, then the tests.
    argv = ['-q', '-p', 'no:cacheprovider',
            os.path.join(test, 'nn', 'conv', 'test_gate_conv.py'),
            os.path.join(test, 'nn', 'models', 'test_gate.py'),
            '-k', 'torchscript and not without or jit_script or scripted',
            '--import-mode=importlib', '-o', 'addopts=',
            '-W', 'ignore::DeprecationWarning']  # fmt: skip
    code = (
        'import sys, pytest, torch_geometric.typing as t\n'
        "print('extras:', t.WITH_TORCH_SPARSE, t.WITH_TORCH_SCATTER)\n"
        f'sys.exit(pytest.main({argv!r}))\n'
    )
    done = subprocess.run(
        [sys.executable, '-c', code], env=env, cwd=str(tmp_path),
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert 'extras: False False\n' in done.stdout, done.stdout[:2000]
    # The scripted tests ran (five at least; more as tests are added), and
    # none skipped:
    summary = done.stdout.strip().splitlines()[-1]
    passed = re.search(r'(\d+) passed', summary)
    assert passed and int(passed.group(1)) >= 5, summary
    assert 'skipped' not in summary, summary


@pytest.mark.xfail(
    torch.__version__ < (2, 7),
    reason="Inductor's CPU code generation of torch 2.5 and 2.6 fails on "
    'the backward (an assertion in CppTile2DKernel.store)',
    strict=True,
)
@pytest.mark.parametrize('add_self_loops', [True, False])
def test_gate_conv_compile_without_graph_breaks(add_self_loops):
    import torch._dynamo

    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, 5)
    conv = GATEConv(5, 4, heads=2, add_self_loops=add_self_loops)
    randomize_attention(conv)
    explanation = torch._dynamo.explain(conv)(x, EDGE_INDEX)
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1

    torch._dynamo.reset()
    compiled = torch.compile(conv, fullgraph=True)
    out, (ei, alpha) = compiled(x, EDGE_INDEX, return_attention_weights=True)
    expected, (ei_ref, alpha_ref) = conv(
        x, EDGE_INDEX, return_attention_weights=True
    )
    assert torch.allclose(out, expected, atol=1e-6)
    assert torch.equal(ei, ei_ref)
    assert torch.allclose(alpha, alpha_ref, atol=1e-6)

    # The compiled graph scores edges differently (fused, per-edge choice of
    # a_s or a_t); its gradients must equal eager ones:
    grads = []
    for module in (compiled, conv):
        conv.zero_grad()
        (module(x, EDGE_INDEX) ** 2).sum().backward()
        grads.append([p.grad.clone() for p in conv.parameters()])
    for g_compiled, g_eager in zip(*grads):
        assert torch.allclose(g_compiled, g_eager, atol=1e-5)
    names = [name for name, _ in conv.named_parameters()]
    assert grads[1][names.index('att_self')].abs().sum() > 0


@pytest.mark.parametrize('share_weights', [False, True])
def test_gate_conv_gradcheck(share_weights):
    torch.manual_seed(0)
    conv = GATEConv(
        3, 2, heads=2, share_weights=share_weights, edge_dim=2, residual=True
    ).double()
    randomize_attention(conv)
    x = torch.randn(NUM_NODES, 3, dtype=torch.double, requires_grad=True)
    edge_attr = torch.randn(EDGE_INDEX.size(1), 2, dtype=torch.double)
    names = [name for name, _ in conv.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in conv.parameters()]
    assert {'lin.weight', 'att_neighbor', 'att_self', 'bias'} <= set(names)

    def fn(x, *params):
        return functional_call(
            conv, dict(zip(names, params)), (x, EDGE_INDEX, edge_attr)
        )

    assert torch.autograd.gradcheck(fn, (x, *params))


def _stack(share_weights: bool, dtype=torch.double):
    torch.manual_seed(12345)
    convs = torch.nn.ModuleList(
        [
            GATEConv(3, 4, share_weights=share_weights, bias=False),
            GATEConv(4, 4, share_weights=share_weights, bias=False),
            GATEConv(4, 2, share_weights=share_weights, bias=False),
        ]
    ).to(dtype)
    for conv in convs:
        randomize_attention(conv)
    return convs


def _run(convs, x, edge_index):
    for i, conv in enumerate(convs):
        x = conv(x, edge_index)
        if i < len(convs) - 1:
            x = x.relu()
    return x


def _loss(convs, x, edge_index, y):
    return F.cross_entropy(_run(convs, x, edge_index), y)


@pytest.mark.parametrize('c', [0.3, 4.0])
def test_gate_conv_rescale_symmetries(c):
    x = torch.randn(NUM_NODES, 3, dtype=torch.double)
    i, l = 1, 0  # neuron i of layer l
    # W^l row i by c, and column i of W, U, V in layer l + 1 by 1 / c:
    convs = _stack(share_weights=False)
    expected = _run(convs, x, EDGE_INDEX)
    with torch.no_grad():
        convs[l].lin.weight[i] *= c
        for lin in [
            convs[l + 1].lin,
            convs[l + 1].lin_src,
            convs[l + 1].lin_dst,
        ]:
            lin.weight[:, i] /= c
    assert torch.allclose(_run(convs, x, EDGE_INDEX), expected)

    # Entry i of both attention vectors by 1 / c, row i of U and V by c:
    convs = _stack(share_weights=False)
    with torch.no_grad():
        convs[l].att_neighbor[0, 0, i] /= c
        convs[l].att_self[0, 0, i] /= c
        convs[l].lin_src.weight[i] *= c
        convs[l].lin_dst.weight[i] *= c
    assert torch.allclose(_run(convs, x, EDGE_INDEX), expected)

    # The same move on W alone changes the output (the test can fail):
    convs = _stack(share_weights=False)
    with torch.no_grad():
        convs[l].lin.weight[i] *= c
    assert not torch.allclose(_run(convs, x, EDGE_INDEX), expected)

    # GATE_S: row i of the shared matrix in layer l by c, entry i of both
    # attention vectors of layer l and column i of layer l + 1 by 1 / c:
    convs = _stack(share_weights=True)
    expected = _run(convs, x, EDGE_INDEX)
    with torch.no_grad():
        convs[l].lin.weight[i] *= c
        convs[l].att_neighbor[0, 0, i] /= c
        convs[l].att_self[0, 0, i] /= c
        convs[l + 1].lin.weight[:, i] /= c
    assert torch.allclose(_run(convs, x, EDGE_INDEX), expected)


def test_gate_conv_conservation_law_gradients():
    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, 3, dtype=torch.double)
    y = torch.randint(0, 2, (NUM_NODES,))

    def theta(p: Tensor, index) -> Tensor:  # <theta, grad theta>
        return (p[index] * p.grad[index]).sum()

    convs = _stack(share_weights=False)
    _loss(convs, x, EDGE_INDEX, y).backward()
    for l, i in itertools.product([0, 1], range(4)):
        this, nxt = convs[l], convs[l + 1]
        # Eq. (structure of GATE gradients), W^l rows vs layer l+1 columns:
        lhs = theta(this.lin.weight, (i, slice(None)))
        rhs = sum(
            theta(lin.weight, (slice(None), i))
            for lin in [nxt.lin, nxt.lin_src, nxt.lin_dst]
        )
        assert torch.allclose(lhs, rhs, atol=1e-10), (l, i)
        # ... and attention vectors vs U, V rows of the same layer:
        lhs = theta(this.att_neighbor, (0, 0, i)) + theta(
            this.att_self, (0, 0, i)
        )
        rhs = theta(this.lin_src.weight, (i, slice(None))) + theta(
            this.lin_dst.weight, (i, slice(None))
        )
        assert torch.allclose(lhs, rhs, atol=1e-10), (l, i)

    convs = _stack(share_weights=True)
    _loss(convs, x, EDGE_INDEX, y).backward()
    for l, i in itertools.product([0, 1], range(4)):
        this, nxt = convs[l], convs[l + 1]
        lhs = theta(this.lin.weight, (i, slice(None)))
        rhs = (
            theta(this.att_neighbor, (0, 0, i))
            + theta(this.att_self, (0, 0, i))
            + theta(nxt.lin.weight, (slice(None), i))
        )
        assert torch.allclose(lhs, rhs, atol=1e-10), (l, i)
        assert lhs.abs() > 1e-8  # not trivially zero


def test_gate_conv_numerical_edge_cases():
    x = torch.randn(NUM_NODES, 5)

    # Huge logits stay finite:
    conv = GATEConv(5, 4, heads=2)
    randomize_attention(conv, scale=1e6)
    out, (ei, alpha) = conv(x, EDGE_INDEX, return_attention_weights=True)
    assert torch.isfinite(out).all() and torch.isfinite(alpha).all()
    sums = torch.zeros(NUM_NODES, 2).index_add_(0, ei[1], alpha)
    assert torch.allclose(sums, torch.ones(NUM_NODES, 2), atol=1e-5)

    # Isolated nodes without self-loops get zeros, not NaN:
    conv = GATEConv(5, 4, add_self_loops=False, bias=False)
    randomize_attention(conv)
    out = conv(x, EDGE_INDEX)
    assert torch.isfinite(out).all()
    assert torch.equal(out[4:], torch.zeros(2, 4))

    # An empty edge set works in both modes:
    empty = torch.empty(2, 0, dtype=torch.long)
    conv = GATEConv(5, 4, bias=False)
    assert torch.allclose(conv(x, empty), conv.lin(x), atol=1e-6)
    conv = GATEConv(5, 4, add_self_loops=False, bias=False)
    assert torch.equal(conv(x, empty), torch.zeros(NUM_NODES, 4))


def test_gate_conv_attention_dropout_is_seeded():
    x = torch.randn(NUM_NODES, 5)
    conv = GATEConv(5, 4, heads=2, dropout=0.5)
    torch.manual_seed(3)
    out1 = conv(x, EDGE_INDEX)
    torch.manual_seed(3)
    out2 = conv(x, EDGE_INDEX)
    assert torch.equal(out1, out2)
    conv.eval()
    assert torch.equal(conv(x, EDGE_INDEX), conv(x, EDGE_INDEX))
    assert not torch.allclose(out1, conv(x, EDGE_INDEX))


def test_gate_conv_parameters_and_reset():
    conv = GATEConv(5, 4, heads=3)
    # The layer on the kernels has a class name of its own (PyG's Inspector
    # reads the base's type comments by class name):
    assert str(conv) == 'GATEConv(5, 4, heads=3)'
    assert conv.att_neighbor.shape == conv.att_self.shape == (1, 3, 4)
    assert conv.lin.weight.shape == conv.lin_src.weight.shape == (12, 5)
    assert conv.lin.bias is None and conv.lin_src.bias is None
    assert conv.lin_src is not conv.lin
    randomize_attention(conv)
    conv.reset_parameters()
    assert torch.equal(conv.att_neighbor, torch.zeros(1, 3, 4))
    assert torch.equal(conv.att_self, torch.zeros(1, 3, 4))
    assert torch.equal(conv.bias, torch.zeros(12))
    # Glorot bound sqrt(6 / (fan_in + fan_out)):
    assert conv.lin.weight.abs().max() <= math.sqrt(6 / (5 + 12))

    shared = GATEConv(5, 4, share_weights=True)
    # One matrix, and a state dict with no alias keys, so that a layer's
    # state dict with separate U and V does not load into it:
    assert shared.lin_src is None and shared.lin_dst is None
    assert set(shared.state_dict()) == {
        'lin.weight',
        'att_neighbor',
        'att_self',
        'bias',
    }
    with pytest.raises(RuntimeError, match='Unexpected key'):
        shared.load_state_dict(GATEConv(5, 4).state_dict())
    assert len(list(shared.parameters())) == 4  # W, a_s, a_t, bias

    lazy = GATEConv(-1, 4, heads=2)
    assert lazy(torch.randn(NUM_NODES, 7), EDGE_INDEX).shape == (NUM_NODES, 8)
    lazy = GATEConv((-1, -1), 4)
    out = lazy(
        (torch.randn(NUM_NODES, 7), torch.randn(4, 3)),
        EDGE_INDEX[:, EDGE_INDEX[1] < 4],
    )
    assert out.shape == (4, 4)


def test_gate_conv_residual():
    x = torch.randn(NUM_NODES, 5)
    conv = GATEConv(5, 4, heads=2, residual=True)
    out = conv(x, EDGE_INDEX)
    res = conv.res
    conv.res = None
    assert torch.allclose(out, conv(x, EDGE_INDEX) + res(x), atol=1e-6)


def test_gate_conv_invalid_arguments():
    with pytest.raises(ValueError, match="'heads' must be a positive int"):
        GATEConv(5, 4, heads=0)
    with pytest.raises(TypeError, match="'heads' must be a positive int"):
        GATEConv(5, 4, heads=1.5)
    with pytest.raises(ValueError, match="'out_channels'"):
        GATEConv(5, 0)
    for dropout in [1.0, -0.1]:
        with pytest.raises(
            ValueError, match=r"'dropout' must be a float in \[0, 1"
        ):
            GATEConv(5, 4, dropout=dropout)
    with pytest.raises(ValueError, match="'in_channels' must be a positive"):
        GATEConv(0, 4)
    with pytest.raises(ValueError, match='as many source as target'):
        GATEConv((5, 3), 4, share_weights=True)
    for bad in ((5, 3, 2), (5,), []):
        with pytest.raises(ValueError, match=r'int or a pair \(source'):
            GATEConv(bad, 4)  # was Python's "too many values to unpack"
    with pytest.raises(ValueError, match="'fill_value' must be"):
        GATEConv(5, 4, edge_dim=2, fill_value='median')
    with pytest.raises(ValueError, match="'edge_dim'"):
        GATEConv(5, 4, edge_dim=0)


def test_gate_conv_in_channels_as_a_list():
    # GATv2Conv takes [src, dst] as it takes (src, dst); GATEConv refused it.
    x = (torch.randn(5, 8), torch.randn(3, 6))
    edge_index = torch.tensor([[0, 1, 4], [0, 1, 2]])
    outs = []
    for in_channels in ((8, 6), [8, 6]):
        torch.manual_seed(0)
        conv = GATEConv(in_channels, 4)
        assert conv.in_channels == (8, 6)
        outs.append(conv(x, edge_index))
    assert torch.equal(outs[0], outs[1])


def test_gate_conv_numpy_scalar_arguments():
    # NumPy scalars (np.float32 is not a Python float) act as the floats.
    x = torch.randn(NUM_NODES, 5)
    edge_attr = torch.randn(EDGE_INDEX.size(1), 2)
    outs = []
    for cast in (float, np.float32):
        torch.manual_seed(0)
        conv = GATEConv(
            5, 4, edge_dim=2, dropout=cast(0.25), fill_value=cast(0.5)
        )
        assert conv.dropout == 0.25 and conv.fill_value == 0.5
        conv.eval()
        outs.append(conv(x, EDGE_INDEX, edge_attr))
    assert torch.equal(outs[0], outs[1])

    for bad in (True, '0.1'):
        with pytest.raises(ValueError, match="'dropout' must be a float"):
            GATEConv(5, 4, dropout=bad)
    with pytest.raises(ValueError, match="'fill_value' must be a finite"):
        GATEConv(5, 4, edge_dim=2, fill_value=True)


def test_numpy_integers_are_taken_as_gatv2conv_takes_them():
    # A sweep's NumPy integers were refused ('heads' must be a positive int
    # (got np.int64(2))); the layer keeps Python ints (its scripted form).
    import numpy as np

    conv = GATEConv(np.int64(5), np.int32(4), heads=np.int64(2),
                    edge_dim=np.int64(3))  # fmt: skip
    args = (conv.in_channels, conv.out_channels, conv.heads, conv.edge_dim)
    assert args == (5, 4, 2, 3)
    assert all(type(a) is int for a in args)
    x, edge_attr = (
        torch.randn(NUM_NODES, 5),
        torch.randn(EDGE_INDEX.size(1), 3),
    )
    scripted = torch.jit.script(conv)
    assert scripted(x, EDGE_INDEX, edge_attr).shape == (NUM_NODES, 8)
    assert GATEConv((np.int64(5), 6), 4).in_channels == (5, 6)
    for bad in (True, 2.0, np.float64(2.0)):
        with pytest.raises(TypeError, match="'heads' must be a positive int"):
            GATEConv(5, 4, heads=bad)


def test_a_fill_tensor_is_checked_once_edge_dim_is_known():
    # With a lazy edge_dim (-1) a tensor fill_value was refused (its length
    # compared with -1), as GATv2Conv accepts it; the first call checks it.
    x, edge_attr = (
        torch.randn(NUM_NODES, 5),
        torch.randn(EDGE_INDEX.size(1), 2),
    )
    conv = GATEConv(5, 4, edge_dim=-1, fill_value=torch.tensor([1.0, 2.0]))
    assert conv(x, EDGE_INDEX, edge_attr).shape == (NUM_NODES, 4)
    assert GATEConv(5, 4, fill_value=torch.ones(3))(x, EDGE_INDEX) is not None
    conv = GATEConv(5, 4, edge_dim=-1, fill_value=torch.ones(3))
    with pytest.raises(ValueError, match="'fill_value' of 1 or 2 entries"):
        conv(x, EDGE_INDEX, edge_attr)
    with pytest.raises(ValueError, match="'fill_value' must be a finite"):
        GATEConv(5, 4, edge_dim=2, fill_value=torch.ones(3))


def test_gate_conv_invalid_inputs():
    x = torch.randn(NUM_NODES, 5)
    conv = GATEConv(5, 4)
    with pytest.raises(ValueError, match="'edge_index' of integers"):
        conv(x, EDGE_INDEX.float())
    with pytest.raises(ValueError, match=r'shape \[2, num_edges\]'):
        conv(x, EDGE_INDEX.t())
    with pytest.raises(ValueError, match=r'shape \[2, num_edges\]'):
        conv(x, EDGE_INDEX[0])
    # An asynchronous assertion (no host sync), the same under compile:
    with pytest.raises(RuntimeError, match='out of range'):
        conv(x, torch.tensor([[0, NUM_NODES], [1, 0]]))
    with pytest.raises(RuntimeError, match='out of range'):
        conv(x, torch.tensor([[0, -1], [1, 0]]))
    with pytest.raises(RuntimeError, match='out of range'):  # bipartite
        conv((x, x[:2]), torch.tensor([[0, 1], [1, 2]]))
    with pytest.raises(ValueError, match='num_nodes, channels'):
        conv(torch.randn(NUM_NODES), EDGE_INDEX)
    with pytest.raises(ValueError, match="with 'edge_dim'"):
        conv(x, EDGE_INDEX, torch.randn(EDGE_INDEX.size(1), 2))
    with pytest.raises(ValueError, match='sparse adjacency of size'):
        conv(x, to_torch_sparse_tensor(EDGE_INDEX, size=(NUM_NODES, 3)))

    conv = GATEConv(5, 4, edge_dim=2)
    with pytest.raises(ValueError, match=r"'edge_attr' of shape \[8, 2\]"):
        conv(x, EDGE_INDEX, torch.randn(EDGE_INDEX.size(1), 3))
    with pytest.raises(ValueError, match=r"'edge_attr' of shape \[8, 2\]"):
        conv(x, EDGE_INDEX, torch.randn(5, 2))

    # int32 indices are accepted:
    assert torch.allclose(conv(x, EDGE_INDEX.int()), conv(x, EDGE_INDEX))


def test_gate_conv_edge_index_sparse_size_must_match_the_nodes():
    # An EdgeIndex that knows other node counts than the features was taken
    # silently; GATv2Conv (PyG's message passing) refuses it.
    from torch_geometric import EdgeIndex

    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, 5)
    conv, gatv2 = GATEConv(5, 4), GATv2Conv(5, 4)
    for sparse_size, x_in in [
        ((NUM_NODES + 1, NUM_NODES + 1), x),
        ((NUM_NODES, NUM_NODES + 1), x),
        ((None, NUM_NODES + 1), x),
        ((NUM_NODES, NUM_NODES), (x, x[:4])),  # bipartite
    ]:
        index = EDGE_INDEX[:, EDGE_INDEX[1] < 4]
        edge_index = EdgeIndex(index, sparse_size=sparse_size)
        with pytest.raises(ValueError, match='expected size'):
            gatv2(x_in, edge_index)
        num_dst = x_in.size(0) if isinstance(x_in, Tensor) else 4
        expected = re.escape(
            f'Expected an EdgeIndex of sparse size ({NUM_NODES}, {num_dst})'
            f', the number of source and target nodes of the node features'
            f' (got {tuple(edge_index.sparse_size())})'
        )
        for method in (conv, conv.forward_with_attention,
                       conv.forward_with_self_attention):  # fmt: skip
            with pytest.raises(ValueError, match=expected):
                method(x_in, edge_index)
    # Unknown sizes and matching ones are taken, as GATv2Conv takes them:
    for sparse_size in [(None, None), (NUM_NODES, None), (NUM_NODES,) * 2]:
        edge_index = EdgeIndex(EDGE_INDEX, sparse_size=sparse_size)
        assert torch.allclose(conv(x, edge_index), conv(x, EDGE_INDEX))
        gatv2(x, edge_index)


@pytest.mark.parametrize('kernel', ['auto', 'reference'])
def test_gate_conv_feature_size_mismatch_names_in_channels(kernel):
    # Issue 35: this ended in "mat1 and mat2 shapes cannot be multiplied".
    from torch_geometric_gate import attention_kernel

    with attention_kernel(kernel):
        conv = GATEConv(4, 3)
        with pytest.raises(ValueError, match=r"'in_channels' = 4 .*got 6"):
            conv(torch.randn(5, 6), EDGE_INDEX[:, :3])
        for kwargs in ({}, {'share_weights': True}, {'residual': True}):
            channels = (4, 4) if kwargs else (4, 2)
            conv = GATEConv(channels, 3, **kwargs)
            x_src = torch.randn(NUM_NODES, 4)
            with pytest.raises(ValueError, match=r"target.*'in_channels' = "):
                conv((x_src, torch.randn(3, 5)), EDGE_INDEX[:, :3])
            with pytest.raises(ValueError, match=r"source.*'in_channels' = "):
                conv((torch.randn(NUM_NODES, 5), x_src[:3]), EDGE_INDEX[:, :3])
        lazy = GATEConv(-1, 3)  # Sized by its first input, checked after:
        lazy(torch.randn(5, 6), EDGE_INDEX[:, :3])
        with pytest.raises(ValueError, match=r"'in_channels' = 6 .*got 4"):
            lazy(torch.randn(5, 4), EDGE_INDEX[:, :3])


@pytest.mark.parametrize('kernel', ['auto', 'reference'])
@pytest.mark.parametrize(
    'kwargs',
    [
        {'fill_value': 'mean'},
        {'fill_value': 'add'},
        {'fill_value': 'max'},
        {'fill_value': 1.0},
        {'fill_value': torch.ones(2)},
        {'add_self_loops': False},
    ],
)
def test_gate_conv_integer_edge_attr_is_refused_alike(kernel, kwargs):
    # Issue 35.17: one rule for every fill value, as nn.Linear has (PyG's
    # GATv2Conv crashes inside its Linear for all but 'mean').
    from torch_geometric_gate import attention_kernel

    conv = GATEConv(5, 4, edge_dim=2, **kwargs)
    x = torch.randn(NUM_NODES, 5)
    edge_attr = torch.randint(0, 3, (EDGE_INDEX.size(1), 2))
    with attention_kernel(kernel):
        for attr in (edge_attr, edge_attr.bool()):
            with pytest.raises(ValueError, match="floating-point 'edge_attr'"):
                conv(x, EDGE_INDEX, attr)
        out = conv(x, EDGE_INDEX, edge_attr.float())
    assert out.shape == (NUM_NODES, 4)


def test_gate_conv_target_to_source_bipartite_range_check():
    # Issue 35.24: under flow='target_to_source' row 0 holds the targets,
    # read in x[1], and PyG's message passing sizes the output by x[0];
    # row 1 holds the sources, read in x[0]. This passed the check and then
    # failed with "index 6 is out of bounds for dimension 0 with size 4".
    conv = GATEConv((3, 3), 4, flow='target_to_source')
    x_src, x_dst = torch.randn(4, 3), torch.randn(7, 3)
    with pytest.raises(RuntimeError, match='out of range.*target_to_source'):
        conv((x_src, x_dst), torch.tensor([[6], [0]]))
    with pytest.raises(RuntimeError, match='row 1 < the number of source'):
        conv((x_src, x_dst), torch.tensor([[0], [5]]))
    out = conv((x_src, x_dst), torch.tensor([[3, 0], [1, 3]]))
    ref = GATv2Conv((3, 3), 4, flow='target_to_source')
    assert out.shape == ref((x_src, x_dst), torch.tensor([[3], [1]])).shape


def test_gate_conv_compiled_with_dynamic_feature_sizes():
    # After a first layer, torch.compile traces the next with a symbolic
    # feature size; the in_channels check must hold for it (it failed with
    # "'in_channels' = 12 columns (got 12)").
    import torch._dynamo

    torch._dynamo.reset()
    torch.manual_seed(0)
    try:
        _compile_three_feature_sizes()
    finally:  # Later tests compile the layer's code afresh:
        torch._dynamo.reset()


def _compile_three_feature_sizes():
    for channels in (5, 12, 7):
        conv = GATEConv(channels, 4)
        compiled = torch.compile(conv, fullgraph=True)
        for num_nodes in (6, 9):
            x = torch.randn(num_nodes, channels)
            edge_index = torch.randint(0, num_nodes, (2, 3 * num_nodes))
            assert torch.allclose(
                compiled(x, edge_index), conv(x, edge_index), atol=1e-6
            )


@pytest.mark.parametrize('edge_dim', [None, 2])
def test_gate_conv_compiled_dynamic_compiles_once(edge_dim):
    # Issue 50.7: the checks' messages formatted the symbolic node and edge
    # counts, which specialized them: a recompilation per node count.
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    torch.manual_seed(0)
    conv, counter = GATEConv(8, 4, edge_dim=edge_dim), CompileCounter()
    compiled = torch.compile(conv, dynamic=True, backend=counter)
    try:
        for num_nodes in (10, 11, 13):
            x = torch.randn(num_nodes, 8)
            edge_index = torch.randint(0, num_nodes, (2, 3 * num_nodes))
            attr = None if edge_dim is None else torch.randn(3 * num_nodes, 2)
            assert torch.allclose(
                compiled(x, edge_index, attr),
                conv(x, edge_index, attr),
                atol=1e-6,
            )
        assert counter.frame_count == 1
    finally:
        torch._dynamo.reset()


@pytest.mark.parametrize('kernel', ['reference', 'chunked', 'triton'])
@pytest.mark.parametrize(
    'add_self_loops,bipartite,edge_dim',
    [
        (True, False, None),
        (True, False, 3),
        (True, True, None),  # more targets than sources
        (False, False, None),
        (False, True, None),  # no self-loop: coinciding indices are two nodes
    ],
)
def test_forward_with_self_attention_is_the_dense_self_attention(
    kernel, add_self_loops, bipartite, edge_dim
):
    # alpha_vv of every target node, from the kernels' self-loop weights
    # alone (with add_self_loops), against the dense equations; a target
    # node without a self-loop gets 0.
    from torch_geometric_gate import attention_kernel

    if kernel == 'triton':
        pytest.importorskip('triton')
    dtype = torch.float32 if kernel == 'triton' else torch.float64
    torch.manual_seed(7)
    x = torch.randn(NUM_NODES, 5, dtype=dtype)
    edge_index = EDGE_INDEX
    x_dst, inp = x, x
    if bipartite:  # Eight targets: 6 and 7 have no self-loop.
        x_src = x[:4]
        edge_index = torch.tensor([[0, 1, 2, 3, 3, 0], [1, 6, 2, 7, 0, 0]])
        x_dst = torch.randn(8, 5, dtype=dtype)
        x, inp = x_src, (x_src, x_dst)
    edge_attr = None
    if edge_dim is not None:
        edge_attr = torch.randn(edge_index.size(1), edge_dim, dtype=dtype)
    conv = GATEConv(
        5, 4, heads=2, add_self_loops=add_self_loops, edge_dim=edge_dim
    ).to(dtype)
    randomize_attention(conv)
    device = kernel_device(kernel)
    if isinstance(inp, Tensor):
        inp_on = inp.to(device)
    else:
        inp_on = (inp[0].to(device), inp[1].to(device))
    attr_on = None if edge_attr is None else edge_attr.to(device)
    with attention_kernel(kernel):
        out, alpha_vv = conv.to(device).forward_with_self_attention(
            inp_on, edge_index.to(device), attr_on
        )
    out, alpha_vv = out.cpu(), alpha_vv.cpu()
    conv.cpu()
    expected_out, attention = dense_gate(conv, x, x_dst, edge_index, edge_attr)
    expected = torch.zeros(x_dst.size(0), 2, dtype=dtype)
    for v, rows in enumerate(attention):
        for u, a_uv in rows:
            # (Source i is target i as dense_gate scores it:)
            if u == v and (x is x_dst or add_self_loops):
                expected[v] += a_uv
    atol = 1e-5 if dtype == torch.float32 else 1e-10
    assert alpha_vv.shape == (x_dst.size(0), 2)
    torch.testing.assert_close(alpha_vv, expected, atol=atol, rtol=1e-4)
    torch.testing.assert_close(out, expected_out, atol=atol, rtol=1e-4)
    if kernel == 'reference':  # The scripted method, the same:
        scripted = torch.jit.script(conv)
        _, scripted_vv = scripted.forward_with_self_attention(
            inp, edge_index, edge_attr
        )
        torch.testing.assert_close(scripted_vv, expected, atol=atol, rtol=0)


@pytest.mark.parametrize('kernel', ['reference', 'chunked', 'triton'])
def test_forward_with_self_attention_keeps_dropout_and_gradients(kernel):
    # In training mode with attention dropout: the same draw and the same
    # gradients as self_loop_attention of all weights (the Triton kernels
    # compute the loops' weights alone, and their gradient's backward).
    from torch_geometric_gate import attention_kernel

    if kernel == 'triton':
        pytest.importorskip('triton')
    torch.manual_seed(0)
    device = kernel_device(kernel)
    x = torch.randn(NUM_NODES, 5, device=device)
    conv = GATEConv(5, 4, heads=2, dropout=0.4, edge_dim=2).to(device)
    randomize_attention(conv)
    edge_attr = torch.randn(EDGE_INDEX.size(1), 2, device=device)
    edge_index = EDGE_INDEX.to(device)
    weights = torch.randn(NUM_NODES, 2, device=device)
    results = []
    for loops_only in (True, False):
        torch.manual_seed(1)
        with attention_kernel(kernel):
            if loops_only:
                out, alpha_vv = conv.forward_with_self_attention(
                    x, edge_index, edge_attr
                )
            else:
                out, att = conv.forward_with_attention(
                    x, edge_index, edge_attr
                )
                alpha_vv = self_loop_attention(*att, NUM_NODES)
        loss = (alpha_vv * weights).sum() + out.square().sum()
        grads = torch.autograd.grad(loss, list(conv.parameters()))
        results.append((out, alpha_vv, *grads))
    assert bool((results[0][1] == 0).any())  # Some loops dropped.
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
