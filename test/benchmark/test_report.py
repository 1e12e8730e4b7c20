r"""``benchmark/report.py``: the result files, the lines above a table, the
output folder."""

import argparse
import csv
import os

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
