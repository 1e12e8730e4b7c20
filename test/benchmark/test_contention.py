r"""``benchmark/contention.py``: the pair timed idle and beside spinning
processes, which it stops afterwards. What is checked is the run and its
bookkeeping, never a timing."""

import csv
import os

import pytest
from benchmark_testing import load_benchmark

contention = load_benchmark('contention')


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
        '--competitors', '2', '--out', str(tmp_path), '--name', 'c',
    ])  # fmt: skip
    assert [r['heads'] for r in rows] == [1, 2]
    # Two competitors per configuration, each ended and reaped:
    started = [p for p in started if contention.SPIN in p.args]
    assert len(started) == 4
    assert all(p.returncode is not None for p in started)
    assert _children() == before
    for r in rows:
        assert r['gate_slowdown'] == r['gate_busy_ms'] / r['gate_idle_ms']
        assert r['relative'] == r['gate_slowdown'] / r['gatv2_slowdown']
        assert r['competitors'] == 2
    with open(tmp_path / 'c.csv') as f:
        assert len(list(csv.DictReader(f))) == 2
    assert (
        'Command: `python benchmark/contention.py'
        in (tmp_path / 'c.md').read_text()
    )


def test_hidden_must_split_into_heads(capsys):
    with pytest.raises(SystemExit):
        contention.parse_args(['--hidden', '10', '--heads', '4'])
    assert 'multiple of every --heads' in capsys.readouterr().err
