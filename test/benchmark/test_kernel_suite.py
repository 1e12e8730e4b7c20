r"""The kernel suite of ``benchmark/conv.py --kernels`` (the GPU command)
and ``benchmark/plot.py``, run on CPU with tiny sizes: the Triton kernel
and the CUDA measurements (peak memory, bandwidths) are skipped there."""

import csv
import os

import pytest
from benchmark_testing import load_benchmark

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def test_kernel_suite_on_cpu_writes_csv_markdown_and_plot(tmp_path):
    pytest.importorskip('matplotlib')
    bench = load_benchmark('conv')
    argv = [
        '--kernels', '--devices', 'cpu',
        '--suite-graphs', 'random-1e3', 'products-size',
        '--deep-scale', '2e-5', '--heads', '1', '2', '--hidden', '4',
        '--compile', 'eager', '--reps', '1', '--warmup', '0',
        '--threads', '1', '--out', str(tmp_path), '--plot',
    ]  # fmt: skip
    rows = bench.main(argv)
    # graphs x heads x dtypes x (3 GATE kernels + GATv2 eager):
    assert len(rows) == 2 * 2 * 2 * 4
    for r in rows:
        if r['kernel'] == 'triton':  # It runs under TRITON_INTERPRET=1:
            interpreted = os.environ.get('TRITON_INTERPRET') == '1'
            assert (
                r['status'] == 'ok'
                if interpreted
                else (r['status'] == 'skipped (needs CUDA)')
            ), r
        else:
            assert r['status'] == 'ok', r
            assert r['step_ms'] > 0 and r['peak_mb'] is None
            assert r['time_vs_gatv2_eager'] > 0
            # Memory on CPU: the bytes saved for backward, over GATv2Conv's.
            assert r['saved_mb'] > 0
            gatv2 = next(
                g for g in rows
                if (g['layer'], g['graph'], g['heads'], g['dtype'])
                == ('GATv2', r['graph'], r['heads'], r['dtype'])
            )  # fmt: skip
            assert r['saved_vs_gatv2_eager'] == pytest.approx(
                r['saved_mb'] / gatv2['saved_mb']
            )
    # The chunked kernels save less than the reference path (no [E, H, C]
    # message tensors) on the larger graph:
    saved = {
        (r['heads'], r['kernel']): r['saved_mb']
        for r in rows
        if r['graph'] == 'random-1e3' and r['dtype'] == 'float32'
    }
    for heads in (1, 2):
        assert saved[heads, 'chunked'] < saved[heads, 'reference']
    with open(tmp_path / 'conv-kernels.csv') as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(rows)
    assert {r['dtype'] for r in table} == {'float32', 'bfloat16'}
    text = (tmp_path / 'conv-kernels.md').read_text()
    assert 'products-size' in text and '3 layers, 256 wide' in text
    assert (tmp_path / 'conv-kernels.png').stat().st_size > 0
    # The plot script reads the suite's CSV and the CPU runs' CSVs:
    plot = load_benchmark('plot')
    points = plot.main(
        [
            str(tmp_path / 'conv-kernels.csv'),
            os.path.join(ROOT, 'benchmark', 'results', 'cpu-eager.csv'),
            '--out',
            str(tmp_path / 'both.png'),
        ]  # fmt: skip
    )
    assert {p['line'] for p in points} >= {'GATE chunked', 'GATv2 eager'}
    assert all(p['mb'] > 0 for p in points)
    assert {p['memory'] for p in points} == {'saved for backward MB'}
    assert (tmp_path / 'both.png').stat().st_size > 0


def test_kernel_suite_graph_sizes_and_bandwidth_helpers():
    bench = load_benchmark('conv')
    import torch

    x, edge_index = bench.sized_graph(
        1000, 5000, 3, torch.device('cpu'), scale=0.5
    )
    assert x.shape == (500, 3) and edge_index.size(1) <= 2500
    assert bool((edge_index[0] != edge_index[1]).all())
    assert bench.copy_bandwidth(torch.device('cpu')) is None


def test_kernel_suite_records_a_missing_graph(tmp_path):
    bench = load_benchmark('conv')
    argv = [
        '--kernels', '--devices', 'cpu', '--suite-graphs', 'cora',
        '--data-root', str(tmp_path / 'none'), '--out', str(tmp_path),
    ]  # fmt: skip
    rows = bench.main(argv)
    assert len(rows) == 1 and rows[0]['status'].startswith('no graph')
    assert 'no graph' in (tmp_path / 'conv-kernels.md').read_text()
