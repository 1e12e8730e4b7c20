import csv
import json
import re

import pytest
import torch
from benchmark_testing import load_benchmark

bench = load_benchmark('conv')


def test_quick_benchmark_writes_table_csv_and_plot(tmp_path):
    pytest.importorskip('matplotlib')
    argv = [
        '--quick',
        '--graphs',
        'random-1e3',
        '--heads',
        '1',
        '2',
        '--reps',
        '2',
        '--threads',
        '1',
        '--out',
        str(tmp_path),
        '--plot',
    ]
    rows = bench.main(argv)

    # One row per heads and mode, each with a pair of positive timings:
    assert len(rows) == 2 * len(bench.MODES)
    assert {(r['heads'], r['mode']) for r in rows} == {
        (h, m) for h in (1, 2) for m in bench.MODES
    }
    for r in rows:
        assert r['reps'] == 2 and r['variant'] == 'eager'
        assert r['gate_ms'] > 0 and r['gatv2_ms'] > 0
        assert r['ratio_min'] <= r['ratio'] <= r['ratio_max']
        assert r['gate_ns_per_edge'] == pytest.approx(
            1e6 * r['gate_ms'] / r['num_edges']
        )
    train = [r for r in rows if r['mode'] == 'train']
    assert all(
        r['gate_saved_mb'] > 0 and r['gatv2_saved_mb'] > 0 for r in train
    )

    with open(tmp_path / 'conv.csv') as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(rows)
    assert table[0]['graph'] == 'random-1e3'
    text = (tmp_path / 'conv.md').read_text()
    assert 'training step' in text and 'torch-scatter' in text
    assert 'GPU' in text
    assert (tmp_path / 'conv.png').stat().st_size > 0


def test_random_graph_has_no_loops_or_duplicates():
    x, edge_index = bench.random_graph(500, channels=3, degree=5, seed=1)
    assert x.shape == (100, 3)
    assert bool((edge_index[0] != edge_index[1]).all())
    key = edge_index[0] * 100 + edge_index[1]
    assert key.unique().numel() == key.numel()
    x2, edge_index2 = bench.random_graph(500, channels=3, degree=5, seed=1)
    assert torch.equal(edge_index, edge_index2) and torch.equal(x, x2)


def test_saved_for_backward_counts_each_storage_once():
    lin = torch.nn.Linear(4, 4, bias=False)
    x = torch.randn(10, 4)

    class Model(torch.nn.Module):
        def forward(self, x, edge_index):
            h = lin(x)  # Saves `x` (weight is not saved for `x`'s grad).
            return h * h  # Saves `h` twice: one storage.

    nbytes = bench.saved_for_backward_bytes(Model(), x, None)
    assert nbytes == 2 * x.numel() * x.element_size()


def test_rss_worker_reports_peak(capsys):
    spec = dict(
        graph='random-1e3',
        channels=8,
        data_root='',
        layer='GATE',
        hidden=8,
        heads=2,
        concat=False,
        threads=1,
    )
    bench.rss_worker(spec)
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0 < res['before'] <= res['peak']


def test_unknown_graph_and_layer_raise():
    with pytest.raises(ValueError, match='Unknown graph'):
        bench.load_graph('karate', 8, '')
    with pytest.raises(ValueError, match='Unknown layer'):
        bench.make_layer('GCN', 8, 8, 1, True)
    with pytest.raises(FileNotFoundError, match='data-root'):
        bench.real_graph('cora', '/nonexistent')


@pytest.mark.parametrize(
    'argv, flag, expected',
    [
        (['--hidden', '-5'], '--hidden', 'integer >= 1'),
        (['--hidden', '3', '--heads', '8'], '--hidden', 'multiple'),
        (['--hidden', '64', '--heads', '1', '3'], '--hidden', 'multiple'),
        (['--heads', '0'], '--heads', 'integer >= 1'),
        (['--reps', '0'], '--reps', 'integer >= 1'),
        (['--warmup', '-1'], '--warmup', 'integer >= 0'),
        (['--min-reps', '5', '--max-reps', '2'], '--max-reps', 'at least'),
        (['--target-time', '0'], '--target-time', r'\(0.0, inf\]'),
        (['--channels', '0'], '--channels', 'integer >= 1'),
        (['--threads', '0'], '--threads', 'integer >= 1'),
        (['--graphs', 'random-0'], '--graphs', 'N >= 100'),
        (['--graphs', 'random-inf'], '--graphs', 'N >= 100'),
        (['--graphs', 'random-150.5'], '--graphs', 'N >= 100'),
        (['--graphs', 'citeseer'], '--graphs', 'random-N'),
    ],
)
def test_bad_flag_is_a_usage_error(capsys, argv, flag, expected):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(argv)
    assert e.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f'argument {flag}' in last and re.search(expected, last), last


def test_good_graph_names_parse():
    args = bench.parse_args(['--graphs', 'random-1e3', 'random-250', 'cora'])
    assert args.graphs == ['random-1e3', 'random-250', 'cora']
    assert bench.parse_args([]).hidden == 64


def test_deep_runs_each_model_under_a_memory_cap(tmp_path):
    # A 6-layer model on a tenth of ogbn-arxiv, under a 2.5 GiB address
    # space: GATE fits, GATv2Conv's [E, H, C] tensors do not.
    argv = [
        '--deep',
        '--deep-scale',
        '0.1',
        '--deep-depth',
        '6',
        '--mem-cap-gb',
        '2.5',
        '--threads',
        '1',
        '--devices',
        'cpu',
        '--out',
        str(tmp_path),
    ]
    rows = {r['layer']: r for r in bench.main(argv)}
    gate, gatv2 = rows['GATE'], rows['GATv2']
    assert 'error' not in gate
    assert 0 < gate['saved_mb'] < gate['peak_mb'] < 2.5 * 1024
    assert gate['num_nodes'] == int(bench.ARXIV['num_nodes'] * 0.1)
    assert gatv2['error'] == 'exceeds cap'
    text = (tmp_path / 'conv.md').read_text()
    assert 'exceeds cap' in text and 'RLIMIT_AS' in text
