import pytest
import torch
from conv_testing import EDGE_INDEX, NUM_NODES, randomize_attention

from torch_geometric_gate import GATEConv, attention_kernel
from torch_geometric_gate.ops import KERNELS, select_kernel


def conv_and_input(**kwargs):
    torch.manual_seed(0)
    conv = GATEConv(5, 4, heads=2, **kwargs)
    randomize_attention(conv)
    return conv, torch.randn(NUM_NODES, 5)


def test_attention_kernel_sets_and_restores_the_kernel():
    conv, x = conv_and_input()
    assert select_kernel(conv, x) == 'chunked'  # 'auto' on a CPU tensor
    with attention_kernel('reference'):
        assert select_kernel(conv, x) == 'reference'
        with attention_kernel('chunked'):
            assert select_kernel(conv, x) == 'chunked'
        assert select_kernel(conv, x) == 'reference'
    assert select_kernel(conv, x) == 'chunked'
    with pytest.raises(ValueError, match=r"Unknown attention kernel 'flash'"):
        with attention_kernel('flash'):
            pass
    assert set(KERNELS) == {'auto', 'reference', 'chunked', 'triton'}


@pytest.mark.parametrize(
    'setup,reason',
    [
        (lambda c: c.register_message_forward_hook(lambda *a: None), 'hooks'),
        (lambda c: setattr(c, 'explain', True), 'explain mode'),
        (lambda c: setattr(c, 'negative_slope', -0.1), 'negative_slope'),
    ],
)
def test_auto_falls_back_and_forcing_says_why(setup, reason):
    conv, x = conv_and_input()
    setup(conv)
    assert select_kernel(conv, x) == 'reference'
    with attention_kernel('chunked'):
        with pytest.raises(RuntimeError, match=reason):
            conv(x, EDGE_INDEX)


def test_other_flow_and_aggregation_fall_back():
    conv, x = conv_and_input(flow='target_to_source')
    assert select_kernel(conv, x) == 'reference'
    conv, x = conv_and_input(aggr='mean')
    assert select_kernel(conv, x) == 'reference'
    with attention_kernel('chunked'), pytest.raises(RuntimeError, match='sum'):
        conv(x, EDGE_INDEX)


def test_lazy_edge_dim_runs_the_reference_until_initialized():
    conv, x = conv_and_input(edge_dim=-1)
    assert select_kernel(conv, x) == 'reference'
    conv(x, EDGE_INDEX, torch.randn(EDGE_INDEX.size(1), 3))
    assert select_kernel(conv, x) == 'chunked'


def test_torch_func_runs_the_reference():
    from torch.func import vmap

    conv, x = conv_and_input()
    seen = []

    def f(x):
        seen.append(select_kernel(conv, x))
        return conv(x, EDGE_INDEX)

    vmap(f)(x.unsqueeze(0).expand(3, -1, -1))
    assert seen == ['reference']


def test_forcing_triton_without_a_gpu_says_why(monkeypatch):
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)
    conv, x = conv_and_input()
    with attention_kernel('triton'):
        with pytest.raises(RuntimeError, match='CUDA|Triton'):
            conv(x, EDGE_INDEX)
    # 'auto' never picks Triton for CPU tensors:
    assert select_kernel(conv, x) == 'chunked'
