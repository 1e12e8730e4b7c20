import os
import os.path as osp
import warnings

import pytest
from data_testing import (
    copy_shared,
    dead_url,
    local_url,
    needs_shared,
    serve,
    shared,
)
from script_testing import module, run_in_one_interpreter
from torch_geometric.datasets import Planetoid

from gate_paper import store, table1
from gate_paper.data import raw_files

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
# --datasets last, so that a test can add one:
TINY = '--quick --depths 1 --max-epochs 15 --no-plots --datasets er8'.split()


def script(*argv):
    (result,) = run_in_one_interpreter(
        [module('gate_paper.table1', *argv)], env=_env(), timeout=300
    )
    return result


def test_quick_defaults(tmp_path):
    # The data is not needed to read the tables: no download.
    args = table1.parse_args(
        ['--quick', '--tables-only', '--out-dir', str(tmp_path)]
    )
    assert args.max_epochs == 200
    assert args.datasets == ['er8', 'cora-rand'] and args.depths == [1, 5]
    assert args.models == ['GAT_S', 'GAT', 'GATE_S', 'GATE']
    assert args.data_root == 'data' or 'GATE_DATA_ROOT' in os.environ


def test_tables_only_names_the_runs_these_options_leave_out(tmp_path):
    # --tables-only without the options that made the runs of --out-dir
    # wrote tables of "0 runs" ("not run" everywhere) over the folder's
    # tables, without a word.
    quick = table1.configs(
        table1.parse_args(
            ['--quick', '--tables-only', '--out-dir', str(tmp_path / 'p')]
        )
    )
    result = dict.fromkeys(table1.RESULTS, 0.5)
    for config in quick[:2]:
        store.save(str(tmp_path), config, result)
    argv = ['--tables-only', '--out-dir', str(tmp_path)]
    with pytest.warns(UserWarning) as caught:
        table1.main(argv)
    (warning,) = [w for w in caught if 'these options' in str(w.message)]
    assert str(warning.message) == (
        f"'{tmp_path}' holds 2 run files that these options do not make; "
        'the tables leave them out and show the 0 of the 48 runs of these '
        'options (give the options that made the runs)'
    )
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        table1.main(['--quick', *argv])


@needs_shared('Planetoid', 'Cora', 'raw')
def test_quick_downloads_cora(tmp_path, monkeypatch):
    # Issue 46: --quick stopped at once without ../shared/data; it now
    # gets Cora through PyG's Planetoid (from a local server here).
    files = {
        local_url('', f'{Planetoid.url}/{os.path.basename(f)}'): shared(f)
        for f in raw_files('Cora')
    }
    monkeypatch.chdir(tmp_path)  # the default root: ./data
    monkeypatch.delenv('GATE_DATA_ROOT', raising=False)
    with serve(files, tmp_path / 'server') as base:
        monkeypatch.setattr(Planetoid, 'url', local_url(base, Planetoid.url))
        table1.parse_args(['--quick', '--out-dir', str(tmp_path / 'runs')])
    raw = tmp_path / 'data' / 'Planetoid' / 'Cora' / 'raw'
    assert sorted(os.listdir(raw)) == sorted(
        os.path.basename(f) for f in raw_files('Cora')
    )


@pytest.mark.parametrize(
    'argv, message',
    [
        (['--jobs', '0'], 'argument --jobs: expected an integer >= 1'),
        (['--threads', '0'], 'argument --threads: expected an integer >= 1'),
        (['--depths', '1', '1'], 'argument --depths: each value once'),
        (
            ['--depths', '1', '0'],
            'argument --depths: expected an integer >= 1',
        ),
        (
            ['--stop-loss', '-1'],
            'argument --stop-loss: expected a finite number in (0.0, inf)',
        ),
        (
            ['--stop-loss', 'nan'],
            'argument --stop-loss: expected a finite number in (0.0, inf)',
        ),
        (  # Not "in (0.0, inf]", which said that inf was allowed:
            ['--stop-loss', 'inf'],
            'argument --stop-loss: expected a finite number in (0.0, inf), '
            "got 'inf'",
        ),
        (
            ['--max-epochs', '0'],
            'argument --max-epochs: expected an integer >= 1',
        ),
        (['--seed', '-1'], 'argument --seed: expected an integer >= 0'),
        (['--compile-after', '-1'], 'argument --compile-after'),
        (['--models', 'MLP'], 'argument --models: invalid choice'),
        (  # GAT_S and GAT crashed in their first run, GATE used Glorot
            ['--hidden', '63', '--depths', '1', '2'],
            'argument --hidden: GAT_S with 2 layers needs an even width for '
            'its looks-linear initialisation (it mirrors the hidden units in '
            'pairs), got 63',
        ),
        (
            ['--hidden', '63', '--models', 'GATE'],
            'argument --hidden: GATE with 2 layers needs an even width',
        ),
    ],
)
def test_bad_arguments_are_usage_errors(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        table1.parse_args(argv + ['--out-dir', str(tmp_path / 'runs')])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_out_dir_naming_a_file_is_a_usage_error(tmp_path, capsys):
    # A raw FileExistsError / OSError (issue 35, item 15).
    a_file = tmp_path / 'table1.csv'
    a_file.write_text('')
    for path in (a_file, a_file / 'runs'):
        with pytest.raises(SystemExit) as e:
            table1.parse_args(['--datasets', 'er2', '--out-dir', str(path)])
        assert e.value.code == 2
        assert 'argument --out-dir' in capsys.readouterr().err


def test_offline_is_a_usage_error_before_any_folder(
    tmp_path, monkeypatch, capsys
):
    # A missing --data-root ended in a URLError after creating empty
    # folders (issue 35, item 16); without network (a server that is down)
    # it is a usage error naming the files, and nothing is made.
    monkeypatch.setattr(Planetoid, 'url', dead_url(Planetoid.url))
    with pytest.raises(SystemExit) as e:
        table1.parse_args(
            [
                '--data-root',
                str(tmp_path / 'data'),
                '--out-dir',
                str(tmp_path / 'runs'),
            ]
        )
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert 'error: argument --data-root: could not download Cora (' in err
    assert f'under the data root {str(tmp_path / "data")!r}' in err
    assert 'Planetoid/Cora/raw/ind.cora.x' in err
    assert 'GATE_DATA_ROOT' in err
    assert os.listdir(tmp_path) == []


def _env():
    return dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')


@pytest.fixture(scope='module')
def first_run(tmp_path_factory):
    r"""A tiny run of two models on two datasets (``python -m
    gate_paper.table1``): its result, and its folder's files and run
    records as it left them; :obj:`None` without ``../shared/data``."""
    if not osp.isdir(shared('Planetoid', 'Cora')):
        return None
    tmp = tmp_path_factory.mktemp('table1')
    data, a = copy_shared('Planetoid', tmp / 'data'), str(tmp / 'a')
    out = script(*TINY, 'cora-rand', '--models', 'GATE', 'GAT',
                 '--data-root', data, '--out-dir', a)  # fmt: skip
    files = {f: open(osp.join(a, f)).read() for f in os.listdir(a)}
    return a, out, files, store.load(a)


@pytest.fixture(scope='module')
def later_runs(tmp_path_factory, first_run):
    r"""The runs of the tests below after :func:`first_run`, in one
    interpreter (each as ``python -m gate_paper.table1`` runs it, in this
    order): the first run resumed with one more model and the same run as
    one of the first in a worker process (``--jobs 2``), both with
    ``../shared/data`` only, and a sweep whose runs diverge."""
    tmp = tmp_path_factory.mktemp('table1-later')
    b, diverged = str(tmp / 'b'), str(tmp / 'diverged')
    argv = '--datasets er8 --depths 5 --models GATE GAT --lr 1e9 '
    argv += '--max-epochs 20 --no-plots --out-dir'
    invocations = [module('gate_paper.table1', *argv.split(), diverged)]
    if first_run is not None:
        a = first_run[0]
        invocations = [
            module('gate_paper.table1', *TINY, '--models', 'GATE', 'GAT',
                   'GATE_S', '--resume', '--out-dir', a),
            module('gate_paper.table1', *TINY, '--models', 'GATE',
                   '--jobs', '2', '--out-dir', b),
        ] + invocations  # fmt: skip
    *resumed, diverging = run_in_one_interpreter(
        invocations, env=_env(), timeout=300
    )
    runs = {'diverged': (diverged, diverging)}
    if resumed:
        runs['resumed'], runs['worker'] = resumed[0], (b, resumed[1])
    return runs


@pytest.mark.slow
def test_tiny_run_resume_and_determinism(first_run, later_runs):
    if first_run is None:
        pytest.skip(f'needs the offline Cora: {shared("Planetoid", "Cora")}')
    a, out, before, records = first_run
    assert out.returncode == 0, out.stderr
    assert sorted(
        (r['config']['dataset'], r['config']['model']) for r in records
    ) == [('cora-rand', 'GAT'), ('cora-rand', 'GATE'), ('er8', 'GAT'),
          ('er8', 'GATE')]  # fmt: skip
    assert all(r['result']['epochs_run'] == 15 for r in records)
    summary = before['table1_summary.csv']
    assert summary.splitlines()[1].startswith('er8,1,')
    assert summary.splitlines()[2].startswith('cora-rand,1,')

    # Resumed with one more model: only that one runs, the others are kept.
    out = later_runs['resumed']
    assert out.returncode == 0, out.stderr
    for name, text in before.items():
        if name.endswith('.json'):
            assert open(osp.join(a, name)).read() == text
    assert len(store.load(a)) == 5

    # The same run in a worker process (--jobs 2) gives the same numbers.
    b, out = later_runs['worker']
    assert out.returncode == 0, out.stderr
    (again,) = store.load(b)
    (first,) = [r for r in records if r['config'] == again['config']]
    first['result'].pop('wall_s'), again['result'].pop('wall_s')
    # the provenance: the same but for the threads and the wall time
    p, q = first.pop('provenance'), again.pop('provenance')
    assert q['threads'] == 1 and p['recorded'] and q['recorded']
    for key in ('threads', 'wall_s'):
        p.pop(key), q.pop(key)
    assert p == q
    assert again == first


@pytest.mark.slow
def test_diverged_runs_do_not_end_the_sweep(later_runs):
    # --lr 1e9 made the recorder raise and ended the sweep, and --resume
    # died the same way (issue 35, item 8; the runner's tests show that a
    # recorded diverged run is not run again).
    folder, out = later_runs['diverged']
    assert out.returncode == 0, out.stderr
    assert (
        'recorded as diverged (NaN metrics), the sweep goes on' in out.stderr
    )
    records = store.load(folder)
    assert [r['status'] for r in records] == ['diverged', 'diverged']
    assert all(r['message'].startswith('diverged at epoch') for r in records)
    summary = open(osp.join(folder, 'table1_summary.csv')).read()
    assert 'er8,5,diverged,diverged,' in summary
    # It says where it wrote (issue 46):
    assert out.stdout.rstrip().splitlines()[-2:] == [
        f'Run files (one JSON file per run): {folder}{os.sep}',
        f'Tables: {osp.join(folder, "table1.md")} and '
        f'{osp.join(folder, "table1_*.csv")}',
    ]
