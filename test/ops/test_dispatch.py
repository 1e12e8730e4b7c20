import functools
import re
import threading
import types

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from conv_testing import (
    EDGE_INDEX,
    NUM_NODES,
    randomize_attention,
    selected_kernel,
)

from torch_geometric_gate import GATEConv, attention_kernel
from torch_geometric_gate.nn.conv import gate_conv_kernels
from torch_geometric_gate.ops import (
    KERNELS,
    AttentionGraph,
    AttentionInputs,
    AttentionParams,
    KernelSettings,
    current_settings,
    dispatch,
    gate_attention,
)


def conv_and_input(**kwargs):
    torch.manual_seed(0)
    conv = GATEConv(5, 4, heads=2, **kwargs)
    randomize_attention(conv)
    return conv, torch.randn(NUM_NODES, 5)


def test_attention_kernel_sets_and_restores_the_kernel():
    conv, x = conv_and_input()
    assert selected_kernel(conv, x) == 'chunked'  # 'auto' on a CPU tensor
    with attention_kernel('reference'):
        assert selected_kernel(conv, x) == 'reference'
        with attention_kernel('chunked'):
            assert selected_kernel(conv, x) == 'chunked'
        assert selected_kernel(conv, x) == 'reference'
    assert selected_kernel(conv, x) == 'chunked'
    with pytest.raises(ValueError, match=r"Unknown attention kernel 'flash'"):
        with attention_kernel('flash'):
            pass
    assert set(KERNELS) == {'auto', 'reference', 'chunked', 'triton'}


def test_one_public_name_for_the_switch():
    import torch_geometric_gate.ops as ops

    for name in ('kernel_attention', 'select_kernel', 'attend'):
        assert not hasattr(ops, name)
    assert 'attention_kernel' in ops.__all__


def test_the_switch_is_per_thread():
    # A enters 'reference', B 'chunked', A exits, B exits: each thread saw
    # its own kernel, and the main thread is still on 'auto'.
    conv, x = conv_and_input()
    steps = [threading.Event() for _ in range(4)]
    seen = {}

    def thread_a():
        with attention_kernel('reference'):
            steps[0].set()
            steps[1].wait(10)
            seen['a'] = selected_kernel(conv, x)
        steps[2].set()

    def thread_b():
        steps[0].wait(10)
        with attention_kernel('chunked'):
            steps[1].set()
            steps[2].wait(10)
            seen['b'] = selected_kernel(conv, x)
        steps[3].set()

    threads = [threading.Thread(target=f) for f in (thread_a, thread_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert all(step.is_set() for step in steps)
    assert seen == {'a': 'reference', 'b': 'chunked'}
    assert selected_kernel(conv, x) == 'chunked'  # 'auto' on CPU
    assert current_settings().kernel == 'auto'


def test_a_thread_outside_the_switch_is_unaffected(monkeypatch):
    # Another thread inside attention_kernel('triton'), which cannot run on
    # CPU without the interpreter, does not reach this one:
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)
    conv, x = conv_and_input()
    expected = conv(x, EDGE_INDEX)
    inside, done = threading.Event(), threading.Event()

    def forcing_triton():
        with attention_kernel('triton'):
            inside.set()
            done.wait(10)

    thread = threading.Thread(target=forcing_triton)
    thread.start()
    try:
        assert inside.wait(10)
        assert selected_kernel(conv, x) == 'chunked'
        assert torch.allclose(conv(x, EDGE_INDEX), expected)
    finally:
        done.set()
        thread.join(20)


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
    assert selected_kernel(conv, x) == 'reference'
    with attention_kernel('chunked'):
        with pytest.raises(RuntimeError, match=reason):
            conv(x, EDGE_INDEX)


def test_other_flow_and_aggregation_fall_back():
    conv, x = conv_and_input(flow='target_to_source')
    assert selected_kernel(conv, x) == 'reference'
    conv, x = conv_and_input(aggr='mean')
    assert selected_kernel(conv, x) == 'reference'
    with attention_kernel('chunked'), pytest.raises(RuntimeError, match='sum'):
        conv(x, EDGE_INDEX)


def test_lazy_edge_dim_runs_the_reference_until_initialized():
    conv, x = conv_and_input(edge_dim=-1)
    assert selected_kernel(conv, x) == 'reference'
    conv(x, EDGE_INDEX, torch.randn(EDGE_INDEX.size(1), 3))
    assert selected_kernel(conv, x) == 'chunked'


def test_torch_func_runs_the_reference():
    from torch.func import vmap

    conv, x = conv_and_input()
    seen = []

    def f(x):
        seen.append(selected_kernel(conv, x))
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
    assert selected_kernel(conv, x) == 'chunked'


def test_forcing_triton_on_float64_says_why(monkeypatch):
    # As attention_kernel documents, a RuntimeError from the switch (the
    # kernels raised a TypeError), for any of the call's tensors:
    monkeypatch.setattr(dispatch, '_triton_missing', lambda x: None)
    triton = KernelSettings(kernel='triton')
    x = torch.empty(1, dtype=torch.float64)
    match = (
        r"attention_kernel\('triton'\) cannot run this call: the Triton "
        r'kernels compute in float32 .* \(got torch.float64\)'
    )
    with pytest.raises(RuntimeError, match=match):
        dispatch.select(triton, x, [], 1)
    with pytest.raises(RuntimeError, match=match):
        dispatch.select(triton, x.float(), [], 1, [torch.float64])
    assert dispatch.select(triton, x.half(), [], 1, [torch.bfloat16]) == (
        'triton'
    )
    q = torch.randn(3, 1, 2, dtype=torch.float64)
    with attention_kernel('triton'), pytest.raises(RuntimeError, match=match):
        gate_attention(q, q, q, torch.tensor([[0, 1], [1, 2]]), q[0])


def test_auto_on_cuda_runs_triton_from_its_size(monkeypatch):
    # Measured on an H100, the reference is faster on small graphs and
    # Triton from 10^6 edges.
    cuda = types.SimpleNamespace(device=torch.device('cuda'),
                                 dtype=torch.bfloat16)  # fmt: skip
    monkeypatch.setattr(dispatch, '_triton_missing', lambda x: None)
    large = KernelSettings().triton_min_edges
    assert dispatch.select(KernelSettings(), cuda, [], large) == 'triton'
    assert (
        dispatch.select(KernelSettings(), cuda, [], large - 1) == 'reference'
    )
    # float64 (the Triton kernels compute in float32 and refuse it):
    double = types.SimpleNamespace(device=cuda.device, dtype=torch.float64)
    assert dispatch.select(KernelSettings(), double, [], large) == 'reference'
    # ... in any of the call's tensors (a float64 attention vector):
    assert (
        dispatch.select(KernelSettings(), cuda, [], large, [torch.float64])
        == 'reference'
    )
    assert (
        dispatch.select(KernelSettings(), cuda, ['hooks'], large)
        == 'reference'
    )
    meta = torch.empty(1, device='meta')
    assert dispatch.select(KernelSettings(), meta, [], large) == 'reference'
    assert (
        dispatch.select(KernelSettings(), torch.empty(1), [], 0) == 'chunked'
    )


def test_triton_kernels_without_triton_say_what_to_install(monkeypatch):
    import sys

    from torch_geometric_gate.ops import triton as gate_triton

    # As if Triton were not installed: its import fails, and the kernels'
    # modules are imported anew (all of them: with the modules that define
    # the kernels imported, as test_triton.py imports them when collected,
    # `_kernels` took them from sys.modules and imported no Triton).
    monkeypatch.setitem(sys.modules, 'triton', None)
    for name in list(sys.modules):
        if name.startswith('torch_geometric_gate.ops.triton._'):
            monkeypatch.delitem(sys.modules, name)
            monkeypatch.delattr(gate_triton, name.rsplit('.', 1)[1], False)
    with pytest.raises(ImportError, match='require Triton; install it with'):
        gate_triton.kernels()


def test_triton_missing_says_why(monkeypatch):
    x = torch.empty(1, device='meta')
    monkeypatch.setattr(dispatch, '_TRITON_INSTALLED', False)
    assert dispatch._triton_missing(x) == 'Triton is not installed'
    monkeypatch.setattr(dispatch, '_TRITON_INSTALLED', True)
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)
    assert dispatch._triton_missing(x).startswith(
        'the input is not on a CUDA device (on a CPU the Triton kernels run '
        'under the interpreter: TRITON_INTERPRET=1'
    )
    monkeypatch.setenv('TRITON_INTERPRET', '1')
    assert dispatch._triton_missing(x) is None


def test_auto_on_cuda_needs_triton(monkeypatch):
    cuda = types.SimpleNamespace(device=torch.device('cuda'),
                                 dtype=torch.float32)  # fmt: skip
    monkeypatch.setattr(dispatch, '_triton_missing', lambda x: 'no Triton')
    large = KernelSettings().triton_min_edges
    assert dispatch.select(KernelSettings(), cuda, [], large) == 'reference'


def test_torch_compile_does_not_trace_the_triton_lookup(monkeypatch):
    # torch 2.11 cannot trace `importlib.util.find_spec`; a lookup that
    # breaks the graph stands in for it on any version (a call-time lookup
    # would fail here):
    def find_spec(name, *args):
        torch._dynamo.graph_break()
        return None

    monkeypatch.setattr(dispatch.importlib.util, 'find_spec', find_spec)
    torch._dynamo.reset()
    step = torch.compile(
        lambda x: x + (dispatch._triton_missing(x) is None), fullgraph=True
    )
    expected = torch.zeros(2) + (
        dispatch._triton_missing(torch.zeros(2)) is None
    )
    assert torch.equal(step(torch.zeros(2)), expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')
def test_auto_on_a_cuda_device_picks_by_the_size(monkeypatch):
    conv, x = conv_and_input()
    conv, x = conv.cuda(), x.cuda()
    assert selected_kernel(conv, x) == 'reference'
    assert (
        selected_kernel(conv, x, KernelSettings().triton_min_edges) == 'triton'
    )
    # Not compared with the reference's output: CUDA's scatter-add is
    # atomic, so its last bits vary from call to call.
    calls = []
    attend = gate_conv_kernels.attend

    def spy(*args):
        result = attend(*args)
        calls.append(result is not None)
        return result

    monkeypatch.setattr(gate_conv_kernels, 'attend', spy)
    conv(x, EDGE_INDEX.cuda())
    assert calls == [False]  # The reference: PyG's message passing.
    large = KernelSettings().triton_min_edges
    conv(x, torch.randint(NUM_NODES, (2, large)).cuda())
    assert calls == [False, True]


def _double_conv_and_input():
    conv, x = conv_and_input(edge_dim=3)
    conv = conv.double()
    edge_attr = torch.randn(EDGE_INDEX.size(1), 3, dtype=torch.double)
    return conv, x.double(), edge_attr


def test_auto_runs_the_reference_under_forward_mode_ad():
    conv, x, edge_attr = _double_conv_and_input()
    tangent = torch.randn_like(x)
    with fwAD.dual_level():
        assert selected_kernel(conv, x) == 'reference'
        dual = fwAD.make_dual(x, tangent)
        out = fwAD.unpack_dual(conv(dual, EDGE_INDEX, edge_attr))
    assert selected_kernel(conv, x) == 'chunked'
    # The JVP against the reverse-mode Jacobian (an independent path):
    jacobian = torch.autograd.functional.jacobian(
        lambda x: conv(x, EDGE_INDEX, edge_attr), x
    )
    expected = (jacobian * tangent).sum(dim=(-2, -1))
    assert torch.allclose(out.primal, conv(x, EDGE_INDEX, edge_attr))
    assert torch.allclose(out.tangent, expected, atol=1e-10)
    with attention_kernel('chunked'), fwAD.dual_level():
        with pytest.raises(RuntimeError, match='forward-mode AD'):
            conv(fwAD.make_dual(x, tangent), EDGE_INDEX, edge_attr)


# The forward of these two has already run, outside any transform, when the
# batched backward starts: the chunked kernels' backward itself must support
# vmap (torch_geometric_gate/ops/chunked.py).
def test_jacobian_vectorized_equals_the_reference():
    conv, x, edge_attr = _double_conv_and_input()

    def f(x):
        return conv(x, EDGE_INDEX, edge_attr)

    with attention_kernel('reference'):
        expected = torch.autograd.functional.jacobian(f, x)
    got = torch.autograd.functional.jacobian(f, x, vectorize=True)
    assert torch.allclose(got, expected, atol=1e-10)


def test_batched_grads_equal_the_reference():
    conv, x, edge_attr = _double_conv_and_input()
    x.requires_grad_()
    grads = torch.randn(3, NUM_NODES, 8, dtype=torch.double)
    with attention_kernel('reference'):
        out = conv(x, EDGE_INDEX, edge_attr)
    expected = torch.stack(
        [torch.autograd.grad(out, x, g, retain_graph=True)[0] for g in grads]
    )
    out = conv(x, EDGE_INDEX, edge_attr)
    (got,) = torch.autograd.grad(out, x, grads, is_grads_batched=True)
    assert torch.allclose(got, expected, atol=1e-10)


def test_kernels_get_tensors_only_and_weights_when_asked(monkeypatch):
    # The seam: the kernels get the layer's edges and parameters as bundled
    # tensors (no module), and need_weights only when weights are returned.
    from torch_geometric_gate.nn.conv import gate_conv_kernels

    calls = []
    attend = gate_conv_kernels.attend

    def spy(graph, params, inputs, why):
        calls.append((graph, params, inputs))
        return attend(graph, params, inputs, why)

    monkeypatch.setattr(gate_conv_kernels, 'attend', spy)
    conv, x = conv_and_input()
    conv(x, EDGE_INDEX)
    conv(x, EDGE_INDEX, return_attention_weights=True)
    conv.forward_with_attention(x, EDGE_INDEX)
    assert [c[1].need_weights for c in calls] == [False, True, True]
    graph, params, inputs = calls[0]
    assert isinstance(graph, AttentionGraph)
    assert isinstance(params, AttentionParams)
    assert isinstance(inputs, AttentionInputs)
    for value in (*graph, *params, *inputs):
        assert value is None or isinstance(value, (torch.Tensor, int, float))
    assert params.att_self is conv.att_self
    num_loops = NUM_NODES
    assert (graph.num_src, graph.num_dst, graph.num_loops) == (6, 6, num_loops)
    loops = torch.arange(NUM_NODES).repeat(2, 1)
    assert torch.equal(graph.src, torch.cat([EDGE_INDEX[0], loops[0]]))
    assert torch.equal(graph.dst, torch.cat([EDGE_INDEX[1], loops[1]]))
    assert graph.edge_index is None  # A plain tensor, not an EdgeIndex.


def test_kernels_get_the_callers_edge_index(monkeypatch):
    from torch_geometric import EdgeIndex

    from torch_geometric_gate.nn.conv import gate_conv_kernels

    graphs = []
    attend = gate_conv_kernels.attend

    def spy(graph, *args):
        graphs.append(graph)
        return attend(graph, *args)

    monkeypatch.setattr(gate_conv_kernels, 'attend', spy)
    conv, x = conv_and_input()
    edge_index = EdgeIndex(EDGE_INDEX, sparse_size=(NUM_NODES, NUM_NODES))
    edge_index = edge_index.sort_by('col')[0]
    out = conv(x, edge_index)
    assert graphs[0].edge_index is edge_index
    assert torch.allclose(out, conv(x, edge_index.as_tensor()), atol=1e-6)


def test_options_of_the_switch_nest_and_are_checked():
    with attention_kernel('chunked', chunk_elements=64) as settings:
        assert settings == current_settings()
        assert (settings.kernel, settings.chunk_elements) == ('chunked', 64)
        with attention_kernel(eager_loops=False):  # Keeps the rest:
            assert current_settings() == settings._replace(eager_loops=False)
        assert current_settings() == settings
    assert current_settings() == KernelSettings(eager_loops=False)  # conftest
    for bad, match in (
        (dict(chunk_elements=0), "'chunk_elements' to be a positive int"),
        (dict(triton_min_edges=-1), "'triton_min_edges' to be a non-neg"),
        (dict(loops_max_elements=1.5), "'loops_max_elements'"),
        (dict(eager_loops=1), "'eager_loops' to be a bool"),
    ):
        with pytest.raises(ValueError, match=match):
            attention_kernel(**bad)


@pytest.mark.parametrize(
    'bad, message',
    [
        (dict(triton_forward_tile=3000),
         "Expected 'triton_forward_tile' to be a power of two (got 3000)"),
        (dict(triton_backward_tile=0),
         "Expected 'triton_backward_tile' to be a power of two (got 0)"),
        (dict(triton_backward_tile=True),
         "Expected 'triton_backward_tile' to be a power of two (got True)"),
        (dict(triton_one_head_nodes=3),
         "Expected 'triton_one_head_nodes' to be a power of two up to 64 "
         '(got 3)'),
        (dict(triton_one_head_nodes=128),
         "Expected 'triton_one_head_nodes' to be a power of two up to 64 "
         '(got 128)'),
        (dict(triton_warps=64),
         "Expected 'triton_warps' to be a power of two up to 32 (got 64)"),
        (dict(triton_warps=2.0),
         "Expected 'triton_warps' to be a power of two up to 32 (got 2.0)"),
        (dict(triton_one_head_layout='yes'),
         "Expected 'triton_one_head_layout' to be a bool (got 'yes')"),
        (dict(triton_backward_record=1),
         "Expected 'triton_backward_record' to be a bool (got 1)"),
    ],
)  # fmt: skip
def test_triton_options_are_checked(bad, message):
    with pytest.raises(ValueError) as err:
        attention_kernel('triton', **bad)
    assert str(err.value) == message
    assert current_settings() == KernelSettings(eager_loops=False)


def test_triton_options_default_to_the_kernels_of_today_and_nest():
    default = current_settings()
    assert (
        default.triton_forward_tile, default.triton_backward_tile,
        default.triton_one_head_layout, default.triton_one_head_nodes,
        default.triton_backward_record, default.triton_warps,
    ) == (4096, 2048, False, 4, False, None)  # fmt: skip
    with attention_kernel(
        'triton', triton_backward_record=True, triton_warps=8
    ):
        with attention_kernel(triton_forward_tile=256) as inner:
            assert inner == default._replace(
                kernel='triton', triton_backward_record=True, triton_warps=8,
                triton_forward_tile=256,
            )  # fmt: skip
    assert current_settings() == default


@pytest.mark.parametrize(
    'option',
    ['chunk_elements', 'loops_max_elements', 'triton_forward_tile',
     'triton_backward_tile'],
)  # fmt: skip
def test_options_the_operators_take_fit_in_int64(option):
    # 2**64 ("no limit") was accepted and ran eagerly, and under
    # torch.compile failed in the custom operator's call ("RuntimeError
    # when making fake tensor call").
    with pytest.raises(ValueError) as err:
        attention_kernel(**{option: 2**64})
    assert str(err.value) == (
        f"Expected '{option}' to be at most 2**63 - 1, the kernels' "
        'operators take an int64 (got 18446744073709551616)'
    )
    if option.startswith('triton'):
        attention_kernel(**{option: 2**62})  # The largest power of two.
        return
    conv, x = conv_and_input()
    with attention_kernel('chunked', **{option: 2**63 - 1}):
        want = conv(x, EDGE_INDEX)
        torch._dynamo.reset()
        try:
            compiled = torch.compile(conv, backend='aot_eager', fullgraph=True)
            got = compiled(x, EDGE_INDEX)
        finally:
            torch._dynamo.reset()
    torch.testing.assert_close(got, want)


def test_chunk_elements_sets_the_chunks():
    # The chunked ATen loops read the option: one edge per chunk and the
    # default give the same result, and the chunk size is what they use.
    from torch_geometric_gate.ops.chunked import steps

    conv, x = conv_and_input()
    sizes = []
    chunks = steps._chunks

    def spy(num_edges, width, chunk):
        sizes.append(chunk)
        return chunks(num_edges, width, chunk)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(steps, '_chunks', spy)
        with attention_kernel('chunked'):
            expected = conv(x, EDGE_INDEX)
        assert set(sizes) == {2**19 * min(torch.get_num_threads(), 8)}
        sizes.clear()
        with attention_kernel('chunked', chunk_elements=8):
            got = conv(x, EDGE_INDEX)
        assert set(sizes) == {8}
    assert torch.allclose(got, expected, atol=1e-6)


def test_a_compiled_layer_follows_a_later_selection():
    # Issue 50.5: the selection was read once, at trace time, with no
    # guard: a compiled layer ignored a later attention_kernel(...), and
    # forcing 'triton' on CPU silently ran the chunked kernels compiled.
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    conv, x = conv_and_input()
    counter = CompileCounter()
    compiled = torch.compile(conv, backend=counter, fullgraph=True)
    try:
        with pytest.MonkeyPatch.context() as m:
            m.delenv('TRITON_INTERPRET', raising=False)
            expected = compiled(x, EDGE_INDEX)  # 'auto': the chunked kernels
            with attention_kernel('triton'):
                with pytest.raises(RuntimeError, match='not on a CUDA'):
                    compiled(x, EDGE_INDEX)
        with attention_kernel('reference'):
            got = compiled(x, EDGE_INDEX)
        assert counter.frame_count == 2  # Retraced for the new selection:
        assert torch.allclose(got, expected, atol=1e-6)
        compiled(x, EDGE_INDEX)
        assert counter.frame_count == 2  # 'auto' again: no recompilation.
    finally:
        torch._dynamo.reset()


def test_the_switch_cannot_leak_out_of_a_generator():
    # Issue 50.9: a block inside a generator stayed in force for the
    # caller while the generator was suspended, and finishing the generator
    # in another thread raised ValueError with the selection left changed.
    def batches():
        with attention_kernel('reference'):
            yield current_settings().kernel

    with pytest.raises(RuntimeError, match="generator or coroutine 'batches'"):
        next(batches())
    assert current_settings().kernel == 'auto'

    async def serve():
        with attention_kernel('reference'):
            return None

    coroutine = serve()
    with pytest.raises(RuntimeError, match="coroutine 'serve'"):
        coroutine.send(None)
    assert current_settings().kernel == 'auto'


def test_a_contextmanager_scopes_its_callers_block():
    import contextlib

    @contextlib.contextmanager
    def reference():
        with attention_kernel('reference'):
            yield

    with reference():
        assert current_settings().kernel == 'reference'
    assert current_settings().kernel == 'auto'


def test_a_block_exited_in_another_thread_restores_its_own_thread():
    block = attention_kernel('reference')
    block.__enter__()
    assert current_settings().kernel == 'reference'
    seen = []

    def exit_elsewhere():
        block.__exit__(None, None, None)
        seen.append(current_settings().kernel)

    thread = threading.Thread(target=exit_elsewhere)
    thread.start()
    thread.join(20)
    assert seen == ['auto']  # That thread's own selection is untouched,
    assert current_settings().kernel == 'auto'  # and this one's restored.


def test_one_block_entered_in_two_threads_at_once():
    # Thread A enters, B enters, A exits, B exits the same instance: each
    # exit restores its own thread (LIFO over the instance popped B's
    # entry at A's exit: A kept 'reference', B lost it).
    block = attention_kernel('reference')
    entered, b_entered, a_left = (threading.Event() for _ in range(3))
    seen = {}

    def thread_a():
        block.__enter__()
        entered.set()
        b_entered.wait(20)
        block.__exit__(None, None, None)
        seen['A after'] = current_settings().kernel
        a_left.set()

    def thread_b():
        entered.wait(20)
        block.__enter__()
        b_entered.set()
        a_left.wait(20)
        seen['B inside'] = current_settings().kernel
        block.__exit__(None, None, None)
        seen['B after'] = current_settings().kernel

    threads = [threading.Thread(target=f) for f in (thread_a, thread_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen == {'A after': 'auto', 'B inside': 'reference',
                    'B after': 'auto'}  # fmt: skip
    assert current_settings().kernel == 'auto'


def _double_in_a_block(x):
    with attention_kernel('reference', inherit=False):
        return x * 2, current_settings()


@attention_kernel('reference', inherit=False)
def _double_decorated(x):
    return x * 2, current_settings()


@pytest.mark.parametrize('double', [_double_in_a_block, _double_decorated])
def test_a_selection_inside_a_function_compiled_whole(double):
    # Dynamo traces the block (fullgraph: no graph break at its enter or
    # exit; a decorator makes a block per call, since torch.compile enters
    # only blocks made in the code it traces), and the selection holds
    # inside it only.
    torch._dynamo.reset()
    try:
        compiled = torch.compile(double, backend='eager', fullgraph=True)
        y, settings = compiled(torch.ones(1))
    finally:
        torch._dynamo.reset()
    assert settings == KernelSettings(kernel='reference')
    assert torch.equal(y, torch.full((1,), 2.0))
    assert current_settings().kernel == 'auto'


def test_a_block_split_by_a_graph_break_holds_on_both_sides():
    # Dynamo runs the block's enter and exit apart from the graphs around a
    # graph break and replays their writes: written into a thread-local's
    # __dict__, they were lost (the whole block ran with 'auto').
    def double(x):
        with attention_kernel('reference'):
            before = current_settings().kernel
            torch._dynamo.graph_break()
            return x * 2, before, current_settings().kernel

    torch._dynamo.reset()
    try:
        compiled = torch.compile(double, backend='eager')
        y, before, after = compiled(torch.ones(1))
    finally:
        torch._dynamo.reset()
    assert (before, after) == ('reference', 'reference')
    assert torch.equal(y, torch.full((1,), 2.0))
    assert current_settings().kernel == 'auto'


def test_the_switch_decorates_a_function():
    block = attention_kernel('reference', chunk_elements=64)

    @block
    def kernel_in(depth):
        """Its docstring."""
        if depth:  # Re-entered by recursion, restored on the way out:
            return kernel_in(depth - 1)
        return current_settings()

    assert kernel_in.__name__ == 'kernel_in'
    assert kernel_in.__doc__ == 'Its docstring.'
    default = current_settings()
    assert kernel_in(2) == default._replace(kernel='reference',
                                            chunk_elements=64)  # fmt: skip
    assert current_settings() == default
    with attention_kernel('chunked'):  # Each call enters the selection.
        assert kernel_in(0).kernel == 'reference'
        assert current_settings().kernel == 'chunked'

    @attention_kernel('reference')
    def fails():
        raise KeyError('inside')

    with pytest.raises(KeyError, match='inside'):
        fails()
    assert current_settings() == default


def test_the_switch_refuses_to_decorate_what_runs_after_the_call():
    # A generator's body runs after the decorated call returned, so the
    # selection would not hold in it.
    def batches():
        yield current_settings().kernel

    async def serve():
        return None

    async def stream():
        yield None

    for fn in (batches, serve, stream):
        with pytest.raises(TypeError, match=(
            f"cannot decorate the generator or coroutine function "
            f"'{fn.__name__}'"
        )):  # fmt: skip
            attention_kernel('reference')(fn)
    with pytest.raises(TypeError, match='decorates a function; got int'):
        attention_kernel('reference')(3)


def test_the_switch_refuses_a_generator_behind_a_partial_or_an_object():
    # A partial of a generator function failed with an AttributeError (no
    # '__name__'), and an object whose `__call__` is a generator was taken:
    # its body ran after the call, outside the selection.
    def batches():
        yield current_settings().kernel

    class Batches:
        def __call__(self):
            yield current_settings().kernel

    for fn in (functools.partial(batches), Batches()):
        with pytest.raises(TypeError, match=(
            'cannot decorate the generator or coroutine function '
            f"'{re.escape(repr(fn))}'"
        )):  # fmt: skip
            attention_kernel('reference')(fn)

    class Plain:
        def __call__(self):
            return current_settings().kernel

    assert attention_kernel('reference')(Plain())() == 'reference'
    assert attention_kernel('reference')(functools.partial(Plain()))() == (
        'reference'
    )


def test_inherit_false_takes_the_defaults_not_the_enclosing_blocks():
    # Options left at None kept the enclosing block's, and nothing led back
    # to a default of None (triton_warps, chunk_elements) inside a block.
    with attention_kernel('triton', triton_warps=8, chunk_elements=64):
        with attention_kernel('chunked', inherit=False) as inner:
            assert inner == KernelSettings(kernel='chunked')
            assert current_settings() == inner
        with attention_kernel('chunked') as inherited:
            assert inherited.triton_warps == 8
        assert current_settings().triton_warps == 8
    with pytest.raises(ValueError, match="'inherit' to be a bool"):
        attention_kernel(inherit=None)
