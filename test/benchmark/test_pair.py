r"""``benchmark/pair.py`` in a tiny mode, and its usage errors."""

import csv
import re

import pytest
from benchmark_testing import load_benchmark

pair = load_benchmark('pair')


@pytest.mark.slow
def test_pair_writes_a_row_per_configuration(tmp_path):
    argv = ['--graphs', 'random-1e3', 'powerlaw-500', '--heads', '1', '2',
            '--hidden', '8', '--channels', '8', '--reps', '2',
            '--modes', 'train', 'inference', '--threads', '1',
            '--out', str(tmp_path)]  # fmt: skip
    rows = pair.main(argv)
    assert [(r['graph'], r['heads'], r['mode']) for r in rows] == [
        (g, h, m)
        for g in ('random-1e3', 'powerlaw-500')
        for h in (1, 2)
        for m in ('train', 'inference')
    ]
    for r in rows:
        assert r['gate_ms'] > 0 and r['gatv2_ms'] > 0
        assert r['ratio_min'] <= r['ratio'] <= r['ratio_max']
        if r['mode'] == 'train':  # Memory of the eager training step:
            assert r['saved_ratio'] == pytest.approx(
                r['gate_saved_mb'] / r['gatv2_saved_mb']
            )
        else:
            assert 'gate_saved_mb' not in r
    with open(tmp_path / 'pair.csv') as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    text = (tmp_path / 'pair.md').read_text()
    assert 'Command: `python benchmark/pair.py --graphs random-1e3' in text
    assert text.count('| cpu | ') == len(rows)


@pytest.mark.parametrize(
    'argv, flag, expected',
    [
        (['--hidden', '3', '--heads', '8'], '--hidden', 'multiple'),
        (['--heads', '0'], '--heads', 'integer >= 1'),
        (['--reps', '0'], '--reps', 'integer >= 1'),
        (['--graphs', 'random-0'], '--graphs', 'N >= 100'),
        (['--compile', 'jit'], '--compile', 'invalid choice'),
    ],
)
def test_bad_flag_is_a_usage_error(capsys, argv, flag, expected):
    with pytest.raises(SystemExit) as e:
        pair.parse_args(argv)
    assert e.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f'argument {flag}' in last and re.search(expected, last), last


def test_out_naming_a_file_is_a_usage_error(tmp_path, capsys):
    (tmp_path / 'f').write_text('')
    with pytest.raises(SystemExit) as e:
        pair.parse_args(['--out', str(tmp_path / 'f')])
    assert e.value.code == 2
    assert 'argument --out: expected a folder' in capsys.readouterr().err


def test_the_rss_step_runs_on_the_threads_of_the_run(tmp_path, monkeypatch):
    # --rss ran its fresh process's step on one thread whatever --threads
    # (or torch's default) the timed steps ran on.
    import torch

    fresh_process = load_benchmark('fresh_process')
    specs = []

    def fresh(spec):
        specs.append(spec)
        return {'step_mb': 1.0}

    monkeypatch.setattr(fresh_process, 'fresh_process_step', fresh)
    threads = torch.get_num_threads()
    try:
        rows = pair.main(['--graphs', 'random-100', '--heads', '1',
                          '--hidden', '4', '--channels', '4', '--reps', '1',
                          '--warmup', '0', '--threads', '2', '--rss',
                          '--out', str(tmp_path)])  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    assert [s['threads'] for s in specs] == [2, 2]  # GATE, GATv2
    assert rows[0]['gate_rss_step_mb'] == 1.0
