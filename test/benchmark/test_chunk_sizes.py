r"""``benchmark/chunk_sizes.py``: GATE's step at several chunk sizes beside
GATv2Conv's. What is checked is that each size runs at its own size, the
default comes back and the bookkeeping, never a timing."""

import csv

import pytest
from benchmark_testing import load_benchmark

from torch_geometric_gate.ops import current_settings, switch
from torch_geometric_gate.ops.chunked import steps

chunk_sizes = load_benchmark('chunk_sizes')


def test_each_size_runs_and_the_default_comes_back(tmp_path, monkeypatch):
    seen = []
    chunks = steps._chunks

    def spy(num_edges, width, chunk):
        seen.append(chunk)
        return chunks(num_edges, width, chunk)

    monkeypatch.setattr(steps, '_chunks', spy)
    # GATE's eager calls would run the compiled loops (no chunk at all):
    settings = current_settings()._replace(eager_loops=True)
    monkeypatch.setattr(switch._STATE.selection, 'settings', settings)
    rows = chunk_sizes.main([
        '--graphs', 'random-2000', '--heads', '1', '2', '--hidden', '8',
        '--channels', '8', '--sizes', '6', '4', '--reps', '2', '--warmup',
        '0', '--threads', '1', '--out', str(tmp_path), '--name', 'c',
    ])  # fmt: skip
    assert set(seen) == {2**6, 2**4}  # The chunks ran, at each size.
    assert current_settings() == settings
    assert [(r['heads'], r['chunk_log2']) for r in rows] == [
        (1, 6), (1, 4), (2, 6), (2, 4)
    ]  # fmt: skip
    for r in rows:
        assert r['threads'] == 1
        if r['chunk_log2'] == 6:  # The reference size, against itself:
            assert r['vs_first'] == 1.0
    with open(tmp_path / 'c.csv') as f:
        assert len(list(csv.DictReader(f))) == 4


def test_sizes_below_16_elements_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        chunk_sizes.main(['--sizes', '3', '--out', str(tmp_path)])
    assert '--sizes' in capsys.readouterr().err
