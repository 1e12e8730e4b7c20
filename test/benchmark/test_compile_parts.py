import torch
from benchmark_testing import load_benchmark

parts = load_benchmark('compile_parts')


def test_the_timed_backward_passes_are_the_gradients_of_the_forward_ones():
    # The parts are only a fair estimate if they compute what a GATE step
    # computes: each backward pass must equal autograd's.
    torch.manual_seed(0)
    num_nodes, num_edges, h, channels = 30, 200, 4, 3
    src = torch.randint(num_nodes, (num_edges,))
    dst = torch.randint(num_nodes, (num_edges,))
    mask = src == dst
    kw = dict(dtype=torch.double)
    q_src, q_dst, value, grad_out = torch.randn(
        4, num_nodes, h * channels, **kw
    )
    att_n, att_s = torch.randn(2, h * channels, **kw)
    alpha = torch.rand(num_edges, h, **kw)
    g = torch.randn(num_edges, h, **kw)

    leaves = [t.clone().requires_grad_() for t in (q_src, q_dst, att_n, att_s)]
    e = parts.score(leaves[0], leaves[1], src, dst, mask, *leaves[2:], h)
    # The per-head dot product of the activation with a_s or a_t:
    z = torch.relu(q_src[src] + q_dst[dst])
    att = torch.where(mask.view(-1, 1), att_s, att_n)
    assert torch.allclose(e, (z * att).view(len(src), h, -1).sum(-1))
    e.backward(g)
    grads = parts.score_backward(q_src, q_dst, src, dst, mask, att_n, att_s, g)
    assert len(grads) == len(leaves)
    for mine, leaf in zip(grads, leaves):
        assert torch.allclose(mine, leaf.grad)
    # Both forms of the attention vectors' gradient:
    for form in (parts.att_grad_summed, parts.att_grad_scattered):
        neighbor, self_ = form(q_src, q_dst, src, dst, mask, g)
        assert torch.allclose(neighbor, leaves[2].grad)
        assert torch.allclose(self_, leaves[3].grad)

    v, a = value.clone().requires_grad_(), alpha.clone().requires_grad_()
    parts.aggregate(v, a, src, dst).backward(grad_out)
    grad_alpha, grad_value = parts.aggregate_backward(
        value, alpha, src, dst, grad_out
    )
    assert torch.allclose(grad_alpha, a.grad)
    assert torch.allclose(grad_value, v.grad)
