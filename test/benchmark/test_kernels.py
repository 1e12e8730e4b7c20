r"""``benchmark/kernels.py`` on a CPU at tiny sizes: the Triton kernels
under the interpreter (or recorded as needing CUDA), the CUDA-only numbers
absent."""

import csv
import os

import pytest
import torch
from benchmark_testing import load_benchmark

kernels = load_benchmark('kernels')
common = load_benchmark('common')
INTERPRET = os.environ.get('TRITON_INTERPRET') == '1'


@pytest.mark.slow
def test_kernel_suite_rows_ratios_and_files(tmp_path):
    argv = ['--devices', 'cpu', '--graphs', 'products-size', 'random-100',
            '--scale', '2e-6', '--heads', '2', '--hidden', '4',
            '--channels', '8', '--dtypes', 'float32', 'bfloat16',
            '--reps', '1', '--warmup', '0', '--threads', '1',
            '--out', str(tmp_path), '--plot']  # fmt: skip
    rows = kernels.main(argv)
    # graphs x dtypes x (3 GATE kernels + GATv2 eager):
    assert len(rows) == 2 * 2 * 4
    for r in rows:
        if r['kernel'] == 'triton' and not INTERPRET:
            assert r['status'] == 'skipped (needs CUDA)'
            continue
        assert r['status'] == 'ok', r
        assert r['step_ms'] > 0 and 'peak_mb' not in r  # CPU: no peak.
        gatv2 = next(
            g for g in rows
            if (g['layer'], g['graph'], g['heads'], g['dtype'])
            == ('GATv2', r['graph'], r['heads'], r['dtype'])
        )  # fmt: skip
        assert r['time_vs_gatv2_eager'] == pytest.approx(
            r['step_ms'] / gatv2['step_ms']
        )
        assert r['saved_vs_gatv2_eager'] == pytest.approx(
            r['saved_mb'] / gatv2['saved_mb']
        )
        if r['kernel'] == 'triton':  # The forward alone, against its bytes:
            assert r['fwd_gbs'] == pytest.approx(
                r['fwd_bytes'] / (r['fwd_kernel_ms'] * 1e-3) / 1e9
            )
    # The chunked kernels save less than the reference (no [E, H, C]):
    saved = {(r['graph'], r['heads'], r['dtype'], r['kernel']): r['saved_mb']
             for r in rows}  # fmt: skip
    for dtype in ('float32', 'bfloat16'):
        key = ('random-100', 2, dtype)
        assert saved[key + ('chunked',)] < saved[key + ('reference',)]
    with open(tmp_path / 'kernels.csv') as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    assert (
        'Command: `python benchmark/kernels.py'
        in (tmp_path / 'kernels.md').read_text()
    )
    assert (tmp_path / 'kernels.png').stat().st_size > 0


def test_gate_kernels_compiled_are_their_own_rows(tmp_path, monkeypatch):
    compiled, attention = [], []

    def fake_compile(model, **kwargs):  # The plumbing, not Inductor.
        compiled.append(type(model).__name__)
        return model

    class Step(common.Step):
        def __init__(self, model, x, edge_index, kernel=None, **kwargs):
            attention.append(kernel)
            super().__init__(model, x, edge_index, kernel, **kwargs)

    monkeypatch.setattr(torch, 'compile', fake_compile)
    # kernels.measure imports it from common when called.
    monkeypatch.setattr(common, 'Step', Step)
    rows = kernels.main(['--devices', 'cpu', '--graphs', 'random-100',
                         '--heads', '1', '--hidden', '4', '--channels', '8',
                         '--kernels', 'reference', 'chunked',
                         '--gate-compiled', '--gatv2', 'eager', 'compiled',
                         '--reps', '1', '--warmup', '0', '--threads', '1',
                         '--out', str(tmp_path)])  # fmt: skip
    assert [r['kernel'] for r in rows] == [
        'reference', 'chunked', 'reference-compiled', 'chunked-compiled',
        'eager', 'compiled',
    ]  # fmt: skip
    assert compiled == ['KernelGATEConv', 'KernelGATEConv', 'GATv2Conv']
    # Each row's step runs its attention kernel (GATv2Conv: none):
    assert attention == ['reference', 'chunked'] * 2 + [None, None]
    for r in rows:
        assert r['status'] == 'ok'
        assert ('saved_mb' in r) == ('compiled' not in r['kernel'])
        assert r['time_vs_gatv2_compiled'] > 0


def test_a_missing_graph_and_the_time_budget_are_recorded(tmp_path):
    argv = [
        '--devices',
        'cpu',
        '--graphs',
        'cora',
        'random-1e3',
        '--data-root',
        str(tmp_path / 'none'),
        '--max-seconds',
        '1e-9',
        '--kernels',
        'chunked',
        '--heads',
        '1',
        '--out',
        str(tmp_path),
    ]
    rows = kernels.main(argv)  # fmt: skip
    assert rows[0]['status'].startswith('no graph: ')
    assert [r['status'] for r in rows[1:]] == ['skipped (time budget)'] * 2
    assert 'no graph' in (tmp_path / 'kernels.md').read_text()


def test_forward_bytes_counts_the_rows_the_kernel_must_move():
    # 10 edges, 4 targets, 2 heads x 3 channels, bfloat16 in and out: per
    # edge an int32 source and an int8 kind and two gathered rows (q_src,
    # value); per target four int32 pointers, q_dst's row, the output row
    # and a float32 log-sum-exp per head.
    row = torch.empty(2, 3, dtype=torch.bfloat16)
    int32, int8, lse = (
        torch.empty((), dtype=t).element_size()
        for t in (torch.int32, torch.int8, torch.float32)
    )
    per_edge = int32 + int8 + 2 * row.nbytes
    per_target = 4 * int32 + 2 * row.nbytes + 2 * lse
    assert kernels.forward_bytes(10, 4, 2, 3, 2, 2) == (
        10 * per_edge + 4 * per_target
    )


def test_real_graph_features_fit_the_channels():
    x = torch.randn(5, 3)
    assert torch.equal(kernels.fit_features(x, 2), x[:, :2])
    padded = kernels.fit_features(x, 6)
    assert padded.shape == (5, 6) and bool((padded[:, 3:] == 0).all())


def test_an_edge_index_input_has_its_gatv2conv_baseline(tmp_path):
    # GATv2Conv on a sorted EdgeIndex was recorded as an error (the bytes
    # saved for backward could not be counted), leaving GATE's rows of
    # that input without ratios.
    argv = ['--devices', 'cpu', '--graphs', 'random-100', '--heads', '1',
            '--hidden', '4', '--channels', '4', '--kernels', 'reference',
            '--inputs', 'plain', 'edge-index', '--reps', '1',
            '--warmup', '0', '--out', str(tmp_path)]  # fmt: skip
    rows = kernels.main(argv)
    assert [(r['input'], r['layer'], r['status']) for r in rows] == [
        (kind, layer, 'ok')
        for kind in ('plain', 'edge-index')
        for layer in ('GATE', 'GATv2')
    ]
    for gate, gatv2 in (rows[:2], rows[2:]):
        assert gate['time_vs_gatv2_eager'] == pytest.approx(
            gate['step_ms'] / gatv2['step_ms']
        )
        assert gate['saved_vs_gatv2_eager'] == pytest.approx(
            gate['saved_mb'] / gatv2['saved_mb']
        )


@pytest.mark.skipif(not INTERPRET, reason='runs the Triton kernels')
def test_the_forward_bandwidth_times_no_sort(monkeypatch):
    # The timed forward took a plain edge tensor, which the Triton path
    # sorts into its CSR in every call: fwd_kernel_ms ("the forward
    # kernel alone") included a sort of all E + N edges. The edges are
    # sorted once now, outside the timed calls.
    op_counter = load_benchmark('op_counter')
    timed = []

    def count(fn, device, warmup=1, reps=5):
        fn()  # Warm-up (the interpreter's first launch).
        with op_counter.counting() as counter:
            fn()
        timed.append(counter)
        return 1.0

    monkeypatch.setattr(common, 'time_step', count)
    x, edge_index = common.random_graph(20, 60, 4)
    got = kernels.forward_bandwidth(edge_index, 20, 2, 4, torch.float32,
                                    torch.device('cpu'), 1)  # fmt: skip
    (counter,) = timed
    assert counter.launches['gate_fwd_kernel'] > 0
    assert not {'aten.sort', 'aten.argsort'} & set(counter.ops), counter.ops
    assert got['fwd_kernel_ms'] == 1.0 and got['fwd_gbs'] > 0
