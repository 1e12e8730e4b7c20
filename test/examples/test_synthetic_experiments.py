import csv
import math
import os
import os.path as osp
import subprocess
import sys
from dataclasses import replace

import pytest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
EXAMPLES = osp.join(ROOT, 'examples')
DATA = os.environ.get(
    'GATE_SHARED_DATA', osp.join(ROOT, '..', 'shared', 'data')
)
PAPER_DATA = osp.join(DATA, 'gate-synthetic')


def _run(script, *argv):
    pytest.importorskip('tqdm')  # the scripts' progress bars
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    proc = subprocess.run(
        [sys.executable, osp.join(EXAMPLES, script), *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _rows(path):
    with open(path, newline='') as f:
        return list(csv.DictReader(f))


def test_self_sufficient_resumes_and_runs_in_parallel(tmp_path):
    pytest.importorskip('matplotlib')
    out = str(tmp_path / 'out')
    common = ['--datasets', 'er2', '--max-epochs', '3', '--out-dir', out]
    _run('self_sufficient.py', *common, '--depths', '1', '--models', 'GATE')
    first = _rows(osp.join(out, 'table1.csv'))
    assert [(r['model'], r['num_layers'], r['epochs_run']) for r in first] == [
        ('GATE', '1', '3')
    ]
    plots = os.listdir(osp.join(out, 'plots'))
    assert 'er2_ours_L1_GATE_seed0_alpha_history.png' in plots

    # Resuming keeps the finished run as it is and adds only the new ones,
    # here from two worker processes.
    _run(
        'self_sufficient.py',
        *common,
        '--depths',
        '1',
        '2',
        '--models',
        'GATE',
        'GAT',
        '--resume',
        '--jobs',
        '2',
        '--no-plots',
    )
    rows = _rows(osp.join(out, 'table1.csv'))
    assert rows[0] == first[0]
    assert sorted((r['model'], r['num_layers']) for r in rows) == [
        ('GAT', '1'),
        ('GAT', '2'),
        ('GATE', '1'),
        ('GATE', '2'),
    ]
    table = open(osp.join(out, 'table1.md')).read()
    assert '| er2 | 2 |' in table and '99.2@100' in table  # paper's numbers
    summary = _rows(osp.join(out, 'table1_summary.csv'))
    assert [(r['dataset'], r['L']) for r in summary] == [
        ('er2', '1'),
        ('er2', '2'),
    ]
    assert summary[1]['GAT (paper)'] == '99.2@119'
    assert len(_rows(osp.join(out, 'table1_runs.csv'))) == 4
    # Three epochs are too few for 100% training accuracy:
    assert {r['first_full_train_epoch'] for r in rows} == {'0'}
    full = _rows(osp.join(out, 'table1_first_full.csv'))
    assert full[0]['GATE (ours)'] == 'never'

    # --tables-only runs nothing and writes the tables of the finished runs.
    _run(
        'self_sufficient.py',
        *common,
        '--depths',
        '1',
        '5',
        '--models',
        'GATE',
        '--tables-only',
    )
    assert _rows(osp.join(out, 'table1.csv')) == rows
    summary = _rows(osp.join(out, 'table1_summary.csv'))
    assert summary[0]['GATE (ours)'].endswith('@3*')  # L=1: 3 epochs
    assert summary[1]['GATE (ours)'] == 'not run'  # L=5 was never run
    assert (
        'tables of the 1 finished runs'
        in open(osp.join(out, 'table1.md')).read()
    )

    # Without --resume, a folder that holds runs is refused (never
    # silently replaced); the runs stay.
    proc = subprocess.run(
        [
            sys.executable,
            osp.join(EXAMPLES, 'self_sufficient.py'),
            *common,
            '--depths',
            '1',
            '--models',
            'GAT',
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=600,
    )
    assert proc.returncode != 0 and '--resume' in proc.stderr
    assert _rows(osp.join(out, 'table1.csv')) == rows


@pytest.mark.skipif(
    not osp.isdir(PAPER_DATA), reason='needs ../shared/data/gate-synthetic'
)
def test_neighbor_dependent_on_paper_graphs(tmp_path):
    pytest.importorskip('scipy')
    out = str(tmp_path / 'out')
    _run(
        'neighbor_dependent.py',
        '--paper-data',
        PAPER_DATA,
        '--ks',
        '1',
        '--extra-depths',
        '0',
        '--models',
        'GATE',
        '--seeds',
        '0',
        '1',
        '2',
        '--max-epochs',
        '2',
        '--no-plots',
        '--out-dir',
        out,
    )
    rows = _rows(osp.join(out, 'table2.csv'))
    assert [(r['source'], r['seed']) for r in rows] == [
        ('paper', '0'),
        ('paper', '1'),
        ('paper', '2'),
    ]
    table = open(osp.join(out, 'table2.md')).read()
    assert '| 1 | 1 |' in table and '96.4 ± 0.7' in table  # paper's GATE_S
    assert ' ± ' in table.split('| 1 | 1 | ')[1].split('|')[0]
    for r in rows:  # the best epoch is at least as good as any other
        assert float(r['max_test_acc']) >= float(r['test_acc_at_min_loss'])
        assert 1 <= int(r['max_test_acc_epoch']) <= 2
    assert len(_rows(osp.join(out, 'table2_max_test.csv'))) == 1


def test_results_csv_of_an_earlier_version_is_read(tmp_path):
    sys.path.insert(0, EXAMPLES)
    try:
        from _experiment import LATER_COLUMNS, RunResult, read_csv, write_csv
    finally:
        sys.path.remove(EXAMPLES)
    path = str(tmp_path / 'runs.csv')
    old = _rows(osp.join(osp.dirname(__file__), 'table1_without_max_test.csv'))
    assert set(LATER_COLUMNS).isdisjoint(old[0])
    (result,), cut = read_csv(
        osp.join(osp.dirname(__file__), 'table1_without_max_test.csv'),
        RunResult,
        LATER_COLUMNS,
    )
    assert cut == 0
    assert math.isnan(result.max_test_acc) and result.max_test_acc_epoch == 0
    assert result.first_full_train_epoch == 40
    write_csv([result], path, RunResult)  # written back in the new layout
    (again,), _ = read_csv(path, RunResult, LATER_COLUMNS)
    assert math.isnan(again.max_test_acc)
    # nan != nan, so compare the rest:
    assert replace(again, max_test_acc=0) == replace(result, max_test_acc=0)


def test_results_csv_of_another_layout_is_refused(tmp_path):
    sys.path.insert(0, EXAMPLES)
    try:
        from _experiment import RunResult, read_csv
    finally:
        sys.path.remove(EXAMPLES)
    path = tmp_path / 'old.csv'
    path.write_text('dataset,model,num_layers\ner2,GATE,1\n')
    with pytest.raises(ValueError, match='not a results CSV'):
        read_csv(str(path), RunResult)


def test_self_sufficient_records_first_epoch_of_full_training_accuracy(
    tmp_path,
):
    out = str(tmp_path / 'out')
    _run(
        'self_sufficient.py',
        '--datasets',
        'er8',
        '--depths',
        '5',
        '--models',
        'GATE',
        '--max-epochs',
        '80',
        '--no-plots',
        '--out-dir',
        out,
    )
    (row,) = _rows(osp.join(out, 'table1.csv'))
    # GATE switches aggregation off and fits the task well before the loss
    # falls below 1e-4 (the run stops there).
    assert row['stopped_early'] == 'True'
    first = int(row['first_full_train_epoch'])
    assert 1 <= first <= int(row['epochs_run']) == int(row['min_loss_epoch'])
    assert float(row['test_acc_at_first_full_train']) >= 0.9
    alphas = [float(a) for a in row['final_alpha_vv_mean'].split()]
    assert min(alphas[1:]) > 0.95
