r"""A compiled GATE training step that CUDA graphs capture (issue 48, item
1): :obj:`torch.compile(..., mode='reduce-overhead')` records the step into
a CUDA graph only when nothing in it makes the host wait for the device or
reads a CPU tensor; a skip is counted by Inductor and the step then runs
uncaptured (silently slower), and Inductor's graph partitioning may instead
leave an operator outside the graph, run from Python at every step with no
skip counted. Runs on a CUDA device only (the GPU session's test phase)."""

import os

import pytest
import torch

from torch_geometric_gate import GATEConv, attention_kernel

ON_GPU = (
    torch.cuda.is_available() and os.environ.get('TRITON_INTERPRET') != '1'
)
pytestmark = pytest.mark.skipif(not ON_GPU, reason='needs CUDA (CUDA graphs)')


def _step(model, x, edge_index):
    out = model(x, edge_index)
    out.float().square().sum().backward()
    return out.detach().clone()


def _setup(heads, dropout=0.0):
    torch.manual_seed(0)
    device = torch.device('cuda')
    num_nodes, num_edges = 300, 3000
    x = torch.randn(num_nodes, 16, device=device)
    edge_index = torch.randint(num_nodes, (2, num_edges), device=device)
    conv = GATEConv(16, 8, heads=heads, dropout=dropout).to(device)
    with torch.no_grad():  # Non-uniform attention:
        conv.att_neighbor.normal_()
        conv.att_self.normal_()
    return conv, x, edge_index


#: Per kernel, the module and the Python functions that its operators call
#: at every eager run (a replay of a captured step calls none).
_CALLED = {
    'triton': (
        'torch_geometric_gate.ops.triton.op',
        ('_forward', '_backward'),
    ),
    'chunked': (
        'torch_geometric_gate.ops.chunked.aten',
        ('_scores', '_score_backward'),
    ),
}


def _compiled_steps(conv, x, edge_index, steps, monkeypatch, kernel):
    r"""The outputs of :obj:`steps` compiled steps (the first a warm-up,
    the second recorded, the others replays) and the calls of the
    :obj:`kernel`'s Python functions (:data:`_CALLED`) in each step."""
    import importlib

    module_name, names = _CALLED[kernel]
    module = importlib.import_module(module_name)
    calls = []
    functions = {name: getattr(module, name) for name in names}

    def counted(name):
        def call(*args, **kwargs):
            calls[-1].append(name)
            return functions[name](*args, **kwargs)

        return call

    for name in functions:
        monkeypatch.setattr(module, name, counted(name))
    torch._dynamo.reset()
    compiled = torch.compile(conv, mode='reduce-overhead')
    outs = []
    try:
        with attention_kernel(kernel, triton_min_edges=0):
            for _ in range(steps):
                calls.append([])
                torch.compiler.cudagraph_mark_step_begin()
                conv.zero_grad()
                outs.append(_step(compiled, x, edge_index))
    finally:
        torch._dynamo.reset()
    return outs, calls


# The Triton kernels first (the GPU session's phase may run out of time):
@pytest.mark.parametrize(
    'kernel,heads', [('triton', 1), ('triton', 4), ('chunked', 4)]
)
def test_compiled_step_is_captured_by_cuda_graphs(kernel, heads, monkeypatch):
    from torch._dynamo.utils import counters

    conv, x, edge_index = _setup(heads)
    reference = GATEConv(16, 8, heads=heads).to(x.device)
    reference.load_state_dict(conv.state_dict())
    counters.clear()
    outs, calls = _compiled_steps(conv, x, edge_index, 4, monkeypatch, kernel)
    with attention_kernel(kernel, triton_min_edges=0):
        expected = _step(reference, x, edge_index)

    skips = dict(counters['inductor'])
    assert skips.get('cudagraph_skips', 0) == 0, skips
    # The replays run the recorded kernels: no launch from Python.
    assert calls[0] and calls[2:] == [[], []], calls
    assert torch.allclose(outs[-1], expected, atol=1e-4, rtol=1e-4)
    for (name, p), q in zip(conv.named_parameters(), reference.parameters()):
        # `conv` took four steps' gradients (zeroed before each), the
        # reference one step's: equal.
        assert torch.allclose(p.grad, q.grad, atol=1e-4, rtol=1e-3), name


@pytest.mark.parametrize('kernel', ['triton', 'chunked'])
def test_dropout_is_captured_and_replays_draw_their_own(kernel, monkeypatch):
    # The kernels' dropout seed was drawn on the host (a CPU tensor kept the
    # attention out of the graph). It is drawn on the device inside the
    # graph: captured, and each replay draws its own (a replay that reused
    # the recorded seed would drop the same weights at every step).
    from torch._dynamo.utils import counters

    conv, x, edge_index = _setup(heads=2, dropout=0.5)
    conv.train()
    counters.clear()
    outs, calls = _compiled_steps(conv, x, edge_index, 4, monkeypatch, kernel)
    skips = dict(counters['inductor'])
    assert skips.get('cudagraph_skips', 0) == 0, skips
    assert calls[0] and calls[2:] == [[], []], calls
    assert not torch.equal(outs[2], outs[3])
    assert not torch.equal(outs[1], outs[2])
