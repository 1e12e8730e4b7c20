r"""A compiled GATE training step that CUDA graphs capture (issue 48, item
1): :obj:`torch.compile(..., mode='reduce-overhead')` records the step into
a CUDA graph only when nothing in it makes the host wait for the device or
reads a CPU tensor; a skip is counted by Inductor and the step then runs
uncaptured (silently slower). Runs on a CUDA device only (the GPU session's
test phase)."""

import os

import pytest
import torch

from torch_geometric_gate import GATEConv, attention_kernel

ON_GPU = (
    torch.cuda.is_available() and os.environ.get('TRITON_INTERPRET') != '1'
)


def _step(model, x, edge_index):
    out = model(x, edge_index)
    out.float().square().sum().backward()
    return out.detach().clone()


@pytest.mark.skipif(not ON_GPU, reason='needs CUDA (CUDA graphs)')
@pytest.mark.parametrize('heads', [1, 4])
def test_compiled_triton_step_is_captured_by_cuda_graphs(heads):
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    device = torch.device('cuda')
    num_nodes, num_edges = 300, 3000
    x = torch.randn(num_nodes, 16, device=device)
    edge_index = torch.randint(num_nodes, (2, num_edges), device=device)
    conv = GATEConv(16, 8, heads=heads).to(device)
    with torch.no_grad():  # Non-uniform attention:
        conv.att_neighbor.normal_()
        conv.att_self.normal_()
    reference = GATEConv(16, 8, heads=heads).to(device)
    reference.load_state_dict(conv.state_dict())

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(conv, mode='reduce-overhead')
    with attention_kernel('triton', triton_min_edges=0):
        for _ in range(3):  # Warm-up, recording, replay.
            torch.compiler.cudagraph_mark_step_begin()
            conv.zero_grad()
            out = _step(compiled, x, edge_index)
        expected = _step(reference, x, edge_index)

    skips = dict(counters['inductor'])
    assert skips.get('cudagraph_skips', 0) == 0, skips
    assert torch.allclose(out, expected, atol=1e-4, rtol=1e-4)
    for (name, p), q in zip(conv.named_parameters(), reference.parameters()):
        # `conv` took three steps' gradients (zeroed before each), the
        # reference one step's: equal.
        assert torch.allclose(p.grad, q.grad, atol=1e-4, rtol=1e-3), name
