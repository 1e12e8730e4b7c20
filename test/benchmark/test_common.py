r"""``benchmark/common.py``: graphs, the chunk size in force, timing and
memory probes; the plot; a step in a fresh process."""

import argparse
import gc
import weakref

import pytest
import torch
from benchmark_testing import load_benchmark

from torch_geometric_gate.ops import current_settings, switch

common = load_benchmark('common')
plotting = load_benchmark('plotting')
fresh_process = load_benchmark('fresh_process')


def test_random_graph_is_seeded_without_duplicates_or_stray_loops():
    x, edge_index = common.random_graph(
        50, 400, 3, isolated=5, input_loops=4, seed=1
    )
    assert x.shape == (50, 3)
    loops = edge_index[0] == edge_index[1]
    # Only the input self-loops asked for, appended last, on nodes 0-3:
    assert loops.sum() == 4 and bool(loops[-4:].all())
    assert edge_index[0, -4:].tolist() == [0, 1, 2, 3]
    key = edge_index[0] * 50 + edge_index[1]
    assert key.unique().numel() == key.numel()
    # The last 5 nodes are isolated:
    assert int(edge_index.max()) < 45
    x2, edge_index2 = common.random_graph(
        50, 400, 3, isolated=5, input_loops=4, seed=1
    )
    assert torch.equal(x, x2) and torch.equal(edge_index, edge_index2)
    with pytest.raises(ValueError, match='isolated < num_nodes'):
        common.random_graph(5, 10, 3, isolated=5)


def test_power_law_graph_has_hubs():
    _, uniform = common.random_graph(2000, 20000, 1)
    _, skewed = common.random_graph(2000, 20000, 1, power_law=1.2)
    top = torch.bincount(skewed[1]).max()
    assert top > 10 * torch.bincount(uniform[1]).max()
    assert int(torch.bincount(skewed[1]).argmax()) == 0  # Node 0 leads.


def test_graph_names():
    for name in ('random-1e3', 'powerlaw-250', 'cora', 'arxiv-size'):
        assert common.graph_name(name) == name
    for bad in ('random-0', 'random-inf', 'random-150.5', 'citeseer'):
        with pytest.raises(argparse.ArgumentTypeError, match='random-N'):
            common.graph_name(bad)
    x, edge_index = common.load_graph('products-size', 7, scale=1e-6)
    assert x.shape == (2, 7)
    x, edge_index = common.load_graph('powerlaw-1e3', 4)
    assert x.shape == (100, 4) and edge_index.size(1) <= 1000


def test_missing_dataset_names_the_flag(tmp_path):
    with pytest.raises(FileNotFoundError, match='--data-root'):
        common.load_graph('cora', 8, data_root=str(tmp_path))
    with pytest.raises(ValueError, match='Unknown layer'):
        common.make_layer('GCN', 8, 8, 1)


def test_saved_bytes_counts_each_storage_once():
    lin = torch.nn.Linear(4, 4, bias=False)
    x = torch.randn(10, 4)

    def forward():
        h = lin(x)  # Saves x (the weight's gradient needs it).
        return h * h  # Saves h twice: one storage.

    assert common.saved_bytes(forward) == 2 * x.numel() * x.element_size()


def test_saved_bytes_frees_the_graph():
    # exp saves its output: a pack hook that keeps the tensor itself ties
    # the output to its own graph in a cycle the collector cannot see (on
    # an H100 this kept 1.2 GB per configuration of kernels.py alive).
    x = torch.randn(1000, requires_grad=True)
    outputs = []

    def forward():
        y = x.exp()
        outputs.append(weakref.ref(y))
        return y

    assert common.saved_bytes(forward) == x.numel() * x.element_size()
    gc.collect()
    assert outputs[0]() is None


def test_saved_bytes_counts_what_an_edge_index_wraps():
    # An EdgeIndex has no storage of its own: saved_bytes raised "Attempted
    # to access the data pointer on an invalid python storage", so that
    # kernels.py --inputs edge-index recorded GATv2Conv as an error and no
    # ratio.
    from torch_geometric import EdgeIndex

    edge_index = EdgeIndex(
        torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), sparse_size=(3, 3)
    ).sort_by('col')[0]
    colptr, _ = edge_index.get_csc()[0]
    x = torch.randn(3, 4, requires_grad=True)

    class Saves(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, edge_index):
            ctx.save_for_backward(x, edge_index)
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    def nbytes(t):
        return t.untyped_storage().nbytes()

    expected = nbytes(x) + nbytes(edge_index.as_tensor()) + nbytes(colptr)
    assert common.saved_bytes(lambda: Saves.apply(x, edge_index)) == expected

    # GATv2Conv on an EdgeIndex saves what it saves on the plain tensor and
    # the index's cached CSC:
    layer = common.make_layer('GATv2', 4, 4, 1)
    plain = common.saved_bytes(lambda: layer(x, edge_index.as_tensor()))
    assert common.saved_bytes(lambda: layer(x, edge_index)) >= plain


def test_time_pair_alternates_and_gives_ratios():
    calls = []
    fns = {'a': lambda: calls.append('a'), 'b': lambda: calls.append('b')}
    res = common.time_pair(fns, 'cpu', warmup=1, reps=3)
    assert calls == ['a', 'b'] * 5
    assert res['ratio_min'] <= res['ratio'] <= res['ratio_max']
    assert res['a_ms'] > 0 and res['b_ms'] > 0


def test_time_rounds_calls_every_function_in_turn():
    calls = []
    fns = {k: (lambda k=k: calls.append(k)) for k in 'abc'}
    times = common.time_rounds(fns, 'cpu', warmup=2, reps=3)
    assert calls == list('abc') * 5  # 2 untimed rounds, then 3 timed
    assert {k: len(v) for k, v in times.items()} == dict(a=3, b=3, c=3)


def test_cuda_events_time_the_stream_of_the_timed_device(monkeypatch):
    # The events were recorded on the current device's stream: timing a
    # step on cuda:1 (cuda:0 current) measured cuda:0's idle stream. Fakes
    # of CUDA's streams and events (no GPU here):
    recorded = []

    class Event:
        def __init__(self, enable_timing=False):
            assert enable_timing

        def record(self, stream=None):
            recorded.append(stream or torch.cuda.current_stream())

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return 2.5

    def current_stream(device=None):
        index = 0 if device is None else torch.device(device).index
        return f'stream of cuda:{index}'

    monkeypatch.setattr(torch.cuda, 'Event', Event)
    monkeypatch.setattr(torch.cuda, 'current_stream', current_stream)
    ms = common.time_call(lambda: None, torch.device('cuda', 1))
    assert ms == 2.5
    assert recorded == ['stream of cuda:1'] * 2


def test_out_of_memory_errors_are_told_apart():
    assert common.is_oom(MemoryError())
    assert common.is_oom(RuntimeError('CUDA out of memory. Tried to ...'))
    assert common.is_oom(RuntimeError("DefaultCPUAllocator: can't allocate"))
    assert not common.is_oom(RuntimeError('index 6 is out of bounds'))
    assert common.status_of(MemoryError()) == 'OOM'
    assert (
        common.status_of(ValueError('bad\nmore')) == 'error: ValueError: bad'
    )


@pytest.mark.slow
def test_plot_refuses_nothing_and_draws_points(tmp_path):
    pytest.importorskip('matplotlib')
    with pytest.raises(ValueError, match='no points'):
        plotting.plot([], str(tmp_path / 'empty.png'))
    points = [
        dict(panel='cpu', line='GATE', edges=e, ms=e / 1e3, mb=None,
             memory='saved MB')
        for e in (100, 1000)
    ]  # fmt: skip
    plotting.plot(points, str(tmp_path / 'p.png'))
    assert (tmp_path / 'p.png').stat().st_size > 0


@pytest.mark.slow
def test_a_step_in_a_fresh_process_reports_memory():
    res = fresh_process.fresh_process_step(
        dict(device='cpu', layer='GATE', graph='random-1e3', channels=8,
             hidden=8, heads=2)
    )  # fmt: skip
    assert res['status'] == 'ok', res
    assert 0 < res['saved_mb'] and 0 <= res['step_mb'] <= res['peak_mb']
    assert res['num_edges'] > 900


def use(monkeypatch, **options):
    settings = current_settings()._replace(**options)
    monkeypatch.setattr(switch._STATE.selection, 'settings', settings)


def test_eager_loops_sets_yields_and_restores(monkeypatch):
    use(monkeypatch, eager_loops=True)
    with common.eager_loops('chunks') as loops:
        assert loops == 'chunks' and not current_settings().eager_loops
    assert current_settings().eager_loops
    use(monkeypatch, eager_loops=False)
    with pytest.raises(RuntimeError, match='stop'):
        with common.eager_loops('compiled') as loops:
            assert loops == 'compiled' and current_settings().eager_loops
            raise RuntimeError('stop')
    assert not current_settings().eager_loops
    # Past four threads eager calls run the chunks anyway:
    before = torch.get_num_threads()
    torch.set_num_threads(5)
    try:
        with common.eager_loops('compiled') as loops:
            assert loops == 'chunks'
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError, match='Expected one of'):
        with common.eager_loops('fused'):
            pass


def test_cpu_chunk_log2_sets_yields_and_restores():
    threads = min(torch.get_num_threads(), 8)
    with common.cpu_chunk_log2(None) as log2:
        assert current_settings().chunk_elements is None and log2 == 19
    with pytest.raises(RuntimeError, match='stop'):
        with common.cpu_chunk_log2(12) as log2:
            assert log2 == 12
            assert current_settings().chunk_elements == 2**12 * threads
            raise RuntimeError('stop')
    assert current_settings().chunk_elements is None
