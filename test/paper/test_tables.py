import csv
import math
import os.path as osp

import pytest

from gate_paper import table1, table2
from gate_paper.tables import markdown, runs_frame, write_tables

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
DATA = osp.join(ROOT, 'docs', 'source', '_data')
RUNS = osp.join(ROOT, 'gate_paper', 'runs')

# Every synthetic table the docs include, with the command that rebuilds
# it from the committed run files (as gate_paper/README.md gives it).
DOCS_TABLES = [
    (
        table1,
        'table1',
        [],
        'self_sufficient',
        'table1',
        48,
        ['summary', 'first_full', 'runs'],
    ),
    (
        table2,
        'table2_ours',
        [],
        'neighbor_dependent/ours',
        'table2',
        180,
        ['summary', 'max_test', 'runs'],
    ),
    (
        table2,
        'table2_paper',
        ['--paper-data', 'unused'],
        'neighbor_dependent/paper',
        'table2',
        180,
        ['summary', 'max_test', 'runs'],
    ),
]


def read_csv(path):
    with open(path, newline='') as f:
        return list(csv.reader(f))


@pytest.mark.parametrize(
    'script, runs, argv, folder, stem, count, names', DOCS_TABLES
)
def test_docs_tables_rebuild_from_the_committed_runs(
    tmp_path, capsys, script, runs, argv, folder, stem, count, names
):
    run_dir = osp.join(RUNS, runs)
    script.main(
        ['--tables-only', '--out-dir', run_dir, '--tables-dir', str(tmp_path)]
        + argv
    )
    assert f'{count} runs' in capsys.readouterr().out
    for name in names:
        committed = read_csv(osp.join(DATA, folder, f'{stem}_{name}.csv'))
        rebuilt = read_csv(tmp_path / f'{stem}_{name}.csv')
        assert rebuilt == committed, name
        assert len(rebuilt) > 1


def test_runs_frame_and_tables(tmp_path):
    records = [
        {
            'config': {'model': 'GATE', 'seed': 0},
            'status': 'finished',
            'result': {'acc': 0.5, 'epoch': 3, 'auc': None},
        },
        {
            'config': {'model': 'GAT', 'seed': 0},
            'status': 'diverged',
            'result': {},
            'message': 'diverged at epoch 2',
        },
    ]
    frame = runs_frame(records, results=['acc', 'epoch', 'wall'])
    assert list(frame.columns) == [
        'model',
        'seed',
        'status',
        'acc',
        'epoch',
        'auc',
        'wall',
    ]
    assert frame['acc'].iloc[0] == 0.5 and math.isnan(frame['acc'].iloc[1])
    assert frame['auc'].isna().all() and frame['wall'].isna().all()
    assert markdown(frame[['model', 'status']]) == (
        '| model | status |\n| --- | --- |\n| GATE | finished |\n'
        '| GAT | diverged |\n'
    )
    text = write_tables(
        str(tmp_path),
        'study',
        'Title',
        'Intro.',
        [('a', None, frame[['model']]), ('b', 'Heading', frame[['seed']])],
    )
    assert text.startswith('# Title\n\nIntro.\n')
    assert '## Heading' in text
    assert read_csv(tmp_path / 'study_a.csv') == [['model'], ['GATE'], ['GAT']]
    assert (tmp_path / 'study.md').read_text() == text
