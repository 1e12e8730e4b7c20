r"""``benchmark/contention.py``: the pair timed idle and beside spinning
processes, which it stops afterwards. What is checked is the run and its
bookkeeping, never a timing."""

import csv
import os

import pytest
import torch
from benchmark_testing import load_benchmark

from torch_geometric_gate.ops import current_settings, switch

contention = load_benchmark('contention')
common = load_benchmark('common')


def _children():
    r"""The pids of this process's children."""
    pid = os.getpid()
    with open(f'/proc/{pid}/task/{pid}/children') as f:
        return set(map(int, f.read().split()))


@pytest.mark.skipif(
    not os.path.exists('/proc/self/task'), reason='reads /proc (Linux)'
)
def test_rows_ratios_and_no_competitor_left(tmp_path, monkeypatch):
    started = []
    popen = contention.subprocess.Popen

    def spy(*args, **kwargs):
        started.append(popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(contention.subprocess, 'Popen', spy)
    before = _children()
    rows = contention.main([
        '--graphs', 'random-2000', '--heads', '1', '2', '--hidden', '8',
        '--channels', '8', '--reps', '1', '--warmup', '0',
        '--competitors', '2', '--rounds', '2', '--eager-loops', 'chunks',
        '--out', str(tmp_path), '--name', 'c',
    ])  # fmt: skip
    assert [r['heads'] for r in rows] == [1, 2]
    # Two competitors per busy phase, two rounds per configuration, each
    # ended and reaped:
    started = [p for p in started if contention.SPIN in p.args]
    assert len(started) == 8
    assert all(p.returncode is not None for p in started)
    assert _children() == before
    for r in rows:
        assert r['gate_slowdown'] == r['gate_busy_ms'] / r['gate_idle_ms']
        assert r['relative_min'] <= r['relative'] <= r['relative_max']
        assert r['competitors'] == 2 and r['rounds'] == 2
        assert r['eager_loops'] == 'chunks' and r['chunk_log2'] == 19
    with open(tmp_path / 'c.csv') as f:
        assert len(list(csv.DictReader(f))) == 2
    assert (
        'Command: `python benchmark/contention.py'
        in (tmp_path / 'c.md').read_text()
    )


def test_relative_is_the_median_over_rounds_of_busy_over_idle(monkeypatch):
    # Phases in order idle, busy, idle, busy, ...; GATE/GATv2Conv ratios:
    ratios = iter([1.0, 2.0, 0.5, 2.0, 1.0, 1.5])
    phases = []

    def fake_time_pair(steps, device, warmup, reps):
        phases.append(contention.Competitors.running)
        ratio = next(ratios)
        return {'gate_ms': 10.0 * ratio, 'gatv2_ms': 10.0, 'ratio': ratio}

    class FakeCompetitors:
        running = False

        def __init__(self, n):
            pass

        def __enter__(self):
            FakeCompetitors.running = True

        def __exit__(self, *exc):
            FakeCompetitors.running = False

    # contention.measure imports it from common when called.
    monkeypatch.setattr(common, 'time_pair', fake_time_pair)
    monkeypatch.setattr(contention, 'Competitors', FakeCompetitors)
    args = contention.parse_args(['--rounds', '3', '--hidden', '8'])
    x, edge_index = torch.randn(4, 8), torch.tensor([[0, 1], [1, 2]])
    row = contention.measure(x, edge_index, 1, args)
    assert phases == [False, True] * 3
    # Per round busy / idle: 2.0, 4.0, 1.5.
    assert row['relative'] == 2.0
    assert (row['relative_min'], row['relative_max']) == (1.5, 4.0)
    assert row['idle_ratio'] == 1.0  # median of 1.0, 0.5, 1.0
    assert row['busy_ratio'] == 2.0  # median of 2.0, 2.0, 1.5
    assert row['gate_busy_ms'] == 20.0 and row['gatv2_idle_ms'] == 10.0


def test_chunk_size_in_force_while_timed_and_restored(tmp_path, monkeypatch):
    seen = []

    def fake_measure(x, edge_index, heads, args):
        settings = current_settings()
        seen.append((settings.chunk_elements, settings.eager_loops))
        raise RuntimeError('stop')

    monkeypatch.setattr(contention, 'measure', fake_measure)
    settings = current_settings()._replace(eager_loops=True)
    monkeypatch.setattr(switch._STATE.selection, 'settings', settings)
    with pytest.raises(RuntimeError, match='stop'):
        contention.main([
            '--graphs', 'random-2000', '--heads', '1', '--hidden', '8',
            '--eager-loops', 'chunks', '--chunk-log2', '12',
            '--out', str(tmp_path),
        ])  # fmt: skip
    threads = min(torch.get_num_threads(), 8)
    assert seen == [(2**12 * threads, False)]  # The chunks, at that size.
    assert current_settings() == settings


def test_chunk_size_needs_the_chunks(capsys):
    with pytest.raises(SystemExit):
        contention.parse_args(['--chunk-log2', '12'])
    assert 'add --eager-loops chunks' in capsys.readouterr().err


def test_hidden_must_split_into_heads(capsys):
    with pytest.raises(SystemExit):
        contention.parse_args(['--hidden', '10', '--heads', '4'])
    assert 'multiple of every --heads' in capsys.readouterr().err
