r"""``benchmark/report.py``: the result files, the lines above a table, the
output folder."""

import argparse
import csv
import os
import re

import pytest
from benchmark_testing import load_benchmark

report = load_benchmark('report')


def test_write_results_replaces_both_files_whole(tmp_path):
    stem = str(tmp_path / 'sub' / 'res')
    rows = [dict(a=1, b=0.5)]
    report.write_results(rows, stem, ['a', 'b', 'c'], 'T', ['note'])
    rows.append(dict(a=2, b=None, c='x'))
    report.write_results(rows, stem, ['a', 'b', 'c'], 'T', ['note'])
    with open(stem + '.csv') as f:
        assert list(csv.DictReader(f)) == [
            dict(a='1', b='0.5', c=''),
            dict(a='2', b='', c='x'),
        ]
    text = open(stem + '.md').read()
    assert text.startswith('# T\n\nnote\n') and '| 2 | - | x |' in text
    assert sorted(os.listdir(tmp_path / 'sub')) == ['res.csv', 'res.md']


def test_output_folder_is_a_usage_error_for_a_file(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    (tmp_path / 'file').write_text('')
    for bad, expected in (
        (tmp_path / 'file', 'expected a folder'),
        (tmp_path / 'file' / 'sub', 'cannot create the folder'),
    ):
        with pytest.raises(SystemExit) as e:
            report.output_folder(parser, str(bad))
        assert e.value.code == 2
        assert expected in capsys.readouterr().err
    assert report.output_folder(parser, str(tmp_path / 'new')) == str(
        tmp_path / 'new'
    )


def test_result_notes_name_the_command_the_machine_and_the_script():
    doc = 'Title.\n\nWhat :obj:`x` measures,\nin two lines::\n\n    usage'
    notes = report.result_notes('pair.py', ['--reps', '3'], doc)
    machine = report.machine_info()
    assert notes == [
        'Command: `python benchmark/pair.py --reps 3`', '', *machine, '',
        'What `x` measures, in two lines',
    ]  # fmt: skip
    assert report.result_notes('pair.py', []) == [
        'Command: `python benchmark/pair.py`', '', *machine,
    ]  # fmt: skip


def test_machine_info_names_the_commit():
    line = report.machine_info()[0]
    assert re.fullmatch(r'- commit: ([0-9a-f]{7,}(\+changes)?|unknown)', line)


def test_the_committed_results_index_is_the_generated_one():
    # After adding or removing a result: python benchmark/report.py
    readme = os.path.join(report.RESULTS, 'README.md')
    with open(readme) as f:
        text = f.read()
    assert report.index_text(text) == text
    index = text[text.index(report.INDEX_MARK) :]
    for name in os.listdir(report.RESULTS):
        if name != 'README.md':
            assert f'`{name}`' in index


def test_results_index_lists_each_result_with_its_files(tmp_path):
    (tmp_path / 'a.md').write_text(
        '# A\n\nCommand: `python benchmark/pair.py --x`\n\n- commit: abc1234'
        '\n- date: today\n\n| t |\n'
    )
    (tmp_path / 'a.csv').write_text('t\n')
    (tmp_path / 'env.txt').write_text('')
    assert report.results_index(str(tmp_path)) == [
        '- `a.md` (and `a.csv`): A; commit abc1234.',
        '  `python benchmark/pair.py --x`',
        '',
        'Also: `env.txt`.',
    ]
    readme = 'intro\n' + report.INDEX_MARK + '\nstale\n'
    assert report.index_text(readme, str(tmp_path)).startswith(
        'intro\n' + report.INDEX_MARK + '\n\n- `a.md`'
    )
    with pytest.raises(ValueError, match='has no line'):
        report.index_text('intro\n', str(tmp_path))


def test_a_result_without_its_commit_is_named(tmp_path):
    (tmp_path / 'b.md').write_text('# B\n\nCommand: `python x.py`\n')
    with pytest.raises(ValueError, match=r'b\.md: no commit'):
        report.results_index(str(tmp_path))


def test_compiled_memory_names_its_command_and_the_machine(
    capsys, monkeypatch
):
    # compiled_memory.py wrote the commit alone above its table (no CPU, no
    # torch_geometric version), and its command from sys.argv: the path as
    # typed, or pytest's own arguments when called with argv.
    bench = load_benchmark('compiled_memory')

    def measure(num_nodes, num_edges, *args):
        return num_edges, dict.fromkeys(bench.NAMES, 1)

    monkeypatch.setattr(bench, 'measure', measure)
    bench.main(['--edges', '1000', '--heads', '1'])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        'Command: `python benchmark/compiled_memory.py --edges 1000 --heads 1`'
    )
    machine = report.machine_info()
    assert lines[2 : 2 + len(machine)] == machine
    assert any(line.startswith('- CPU: ') for line in machine)
    assert any('torch_geometric ' in line for line in machine)
