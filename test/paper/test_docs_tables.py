r"""The results page's tables: every CSV that ``docs/source/results.rst``
includes is rebuilt from the committed run files by the script that wrote
it, and equals the committed CSV."""

import csv
import os
import os.path as osp
import re

import pytest

from gate_paper import queue_results, real_graphs
from gate_paper.store import read, run_id

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SOURCE = osp.join(ROOT, 'docs', 'source')
DATA = osp.join(SOURCE, '_data')
RUNS = osp.join(ROOT, 'gate_paper', 'runs')

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
        + ['--tables-only', '--out-dir', osp.join(RUNS, runs)]
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
    rebuilt += ['real_graphs/strong/', 'real_graphs/tolokers/']
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
        folder = osp.join(RUNS, runs)
        args = real_graphs.parse_args(
            argv + ['--tables-only', '--out-dir', folder]
        )
        names = {run_id(c) + '.json' for c in real_graphs.configs(args)}
        assert len(names) == count
        assert set(os.listdir(folder)) == names, runs


def test_every_committed_run_file_says_its_provenance():
    # Issue 49: a run file says what made it, or that it was not recorded;
    # no placeholder reads as a value (Table 1's max_test_acc_epoch 0 for
    # a max_test_acc never recorded).
    studies = sorted(os.listdir(RUNS))
    assert studies
    for study in studies:
        for name in os.listdir(osp.join(RUNS, study)):
            record = read(osp.join(RUNS, study, name))
            assert name == run_id(record['config']) + '.json'
            p = record['provenance']
            if p['recorded']:
                assert {'commit', 'torch', 'device', 'threads'} <= set(p)
                assert {'kernel', 'compiled', 'epochs_run', 'wall_s'} <= set(p)
                continue
            assert 'not kept' in p['note']
            result = record['result']
            if 'max_test_acc' in result and result['max_test_acc'] is None:
                assert result['max_test_acc_epoch'] is None
                assert 'max_test_acc' in p['results_not_recorded']


def test_the_run_queues_tables_rebuild_from_the_committed_runs(tmp_path):
    # The strong recipe's GAT-sep against GATE-sep ("no runs yet" until
    # the GPU runs arrive) and, once it has runs, Tolokers.
    queue_results.rebuild_tables(RUNS, str(tmp_path))
    for sub in ('strong', 'tolokers'):
        folder = osp.join(DATA, 'real_graphs', sub)
        if not osp.isdir(folder):
            assert not (tmp_path / sub).exists()
            continue
        committed = sorted(os.listdir(folder))
        assert committed == sorted(os.listdir(tmp_path / sub))
        for name in committed:
            with open(osp.join(folder, name)) as f:
                assert (tmp_path / sub / name).read_text() == f.read(), name
