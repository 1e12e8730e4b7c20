r"""The results page's tables: every CSV that ``docs/source/results.rst``
includes is rebuilt from the committed run files by the script that wrote
it, and equals the committed CSV."""

import csv
import os
import os.path as osp
import re

import pytest

from gate_paper import real_graphs
from gate_paper.store import run_id

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SOURCE = osp.join(ROOT, 'docs', 'source')
DATA = osp.join(SOURCE, '_data')

# The real-graph studies: the run folder, the options that made its runs
# (the same configurations), the tables' folder and the number of runs.
REAL_GRAPHS = [
    (
        'real_graphs_small',
        ['--datasets', 'Texas', 'Wisconsin', 'Cora', '--patience', '300'],
        'real_graphs/small',
        720,
    ),
    (
        'real_graphs_citeseer_actor',
        ['--datasets', 'CiteSeer', 'Actor'],
        'real_graphs/citeseer_actor',
        480,
    ),
    (
        'real_graphs_minesweeper',
        [
            '--datasets',
            'Minesweeper',
            '--models',
            'MLP',
            'GAT',
            'MLP+GAT',
            'FAGCN',
            'GATE',
        ],
        'real_graphs/minesweeper',
        100,
    ),
]
# The synthetic tables, rebuilt by test_tables.py (the same folders):
SYNTHETIC = [
    'self_sufficient/table1_',
    'neighbor_dependent/ours/table2_',
    'neighbor_dependent/paper/table2_',
]


def read_csv(path):
    with open(path, newline='') as f:
        return list(csv.reader(f))


@pytest.mark.parametrize('runs, argv, folder, count', REAL_GRAPHS)
def test_real_graph_tables_rebuild_from_the_committed_runs(
    tmp_path, capsys, runs, argv, folder, count
):
    real_graphs.main(
        argv
        + ['--tables-only', '--out-dir', osp.join(DATA, 'runs', runs)]
        + ['--tables-dir', str(tmp_path)]
    )
    assert f'{count} runs' in capsys.readouterr().out
    committed = sorted(os.listdir(osp.join(DATA, folder)))
    assert committed == sorted(os.listdir(tmp_path))
    for name in committed:
        if name.endswith('.csv'):
            rebuilt = read_csv(tmp_path / name)
            assert rebuilt == read_csv(osp.join(DATA, folder, name)), name
            assert len(rebuilt) > 1, name
        else:
            with open(osp.join(DATA, folder, name)) as f:
                assert (tmp_path / name).read_text() == f.read(), name


def test_every_table_on_the_results_page_is_rebuilt():
    with open(osp.join(SOURCE, 'results.rst')) as f:
        files = re.findall(r':file:\s*(\S+)', f.read())
    assert len(files) >= 7
    rebuilt = [f'real_graphs/{osp.basename(f)}/' for _, _, f, _ in REAL_GRAPHS]
    for path in files:
        assert path.startswith('_data/') and path.endswith('.csv'), path
        name = path[len('_data/') :]
        assert osp.isfile(osp.join(DATA, name)), path
        covered = [p for p in rebuilt + SYNTHETIC if name.startswith(p)]
        assert covered, f'{path}: no test rebuilds it'


def test_every_run_file_belongs_to_its_study():
    # A run file that the study's options do not make would be ignored by
    # the tables: none may be there.
    for runs, argv, _, count in REAL_GRAPHS:
        folder = osp.join(DATA, 'runs', runs)
        args = real_graphs.parse_args(
            argv + ['--tables-only', '--out-dir', folder]
        )
        names = {run_id(c) + '.json' for c in real_graphs.configs(args)}
        assert len(names) == count
        assert set(os.listdir(folder)) == names, runs
