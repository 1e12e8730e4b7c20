import os
import os.path as osp

import numpy as np
import pytest
from data_testing import needs_shared, shared
from script_testing import module, run_in_one_interpreter

from gate_paper import store, synthetic, table2
from gate_paper.data import graph_digest, npz_graph

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def write_graph(path, overlap=False, seed=0, compressed=False):
    gen = np.random.default_rng(seed)
    n = 40
    train, val, test = (
        (np.arange(n) % 4 < 2),
        np.arange(n) % 4 == 2,
        (np.arange(n) % 4 == 3),
    )
    if overlap:
        test = test.copy()
        test[0] = True
    (np.savez_compressed if compressed else np.savez)(
        path,
        x=gen.standard_normal((n, 2)).astype(np.float32),
        edge_index=gen.integers(0, n, (2, 120)),
        y=gen.integers(0, 2, n),
        train_mask=train,
        val_mask=val,
        test_mask=test,
    )


def test_quick_defaults(tmp_path):
    args = table2.parse_args(['--quick', '--out-dir', str(tmp_path)])
    assert (args.max_epochs, args.ks, args.seeds) == (200, [1], [0, 1])
    assert args.extra_depths == [0, 1, 2] and args.source == 'ours-g0'
    assert len(table2.configs(args)) == 24


@pytest.mark.parametrize(
    'argv, message',
    [
        (['--seeds', '0', '-1'], 'argument --seeds: expected an integer >= 0'),
        (['--seeds', '0', '0'], 'argument --seeds: each value once'),
        (['--ks', '0'], 'argument --ks: expected an integer >= 1'),
        (['--extra-depths', '-1'], 'argument --extra-depths: expected an'),
        (
            ['--hidden', 'x'],
            "argument --hidden: expected an integer >= 1, got 'x'",
        ),
        (['--graph-seed', '-1'], 'argument --graph-seed'),
        (
            ['--hidden', '63', '--ks', '1'],
            'argument --hidden: GAT_S with 2 layers needs an even width',
        ),
    ],
)
def test_bad_arguments_are_usage_errors(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        table2.parse_args(argv + ['--out-dir', str(tmp_path / 'runs')])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_odd_width_of_one_layer(tmp_path):
    # A network of one layer has no hidden units to pair.
    argv = ['--hidden', '63', '--ks', '1', '--extra-depths', '0']
    args = table2.parse_args(argv + ['--out-dir', str(tmp_path)])
    assert {c['hidden'] for c in table2.configs(args)} == {63}


def test_paper_data_with_overlapping_masks_is_refused(tmp_path, capsys):
    # --paper-data did not check its masks: train and test overlapping were
    # trained and tested on the same nodes (issue 35, item 14).
    write_graph(tmp_path / 'neighbor_dependent_k1.npz', overlap=True)
    with pytest.raises(SystemExit) as e:
        table2.parse_args(
            [
                '--ks',
                '1',
                '--paper-data',
                str(tmp_path),
                '--out-dir',
                str(tmp_path / 'runs'),
            ]
        )
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert 'neighbor_dependent_k1.npz' in err
    assert 'nodes are in both the training and test masks' in err


def test_corrupt_paper_data_names_the_file(tmp_path, capsys):
    # A corrupted npz gave numpy's "allow_pickle" message (item 19).
    (tmp_path / 'neighbor_dependent_k1.npz').write_bytes(b'PK\x03\x04broken')
    with pytest.raises(SystemExit):
        table2.parse_args(
            [
                '--ks',
                '1',
                '--paper-data',
                str(tmp_path),
                '--out-dir',
                str(tmp_path / 'runs'),
            ]
        )
    err = capsys.readouterr().err
    assert 'neighbor_dependent_k1.npz' in err
    assert 'is not a readable .npz file' in err


def test_paper_data_of_float_labels_is_a_usage_error(tmp_path, capsys):
    # Only the first run crashed on an array of another dtype.
    path = tmp_path / 'neighbor_dependent_k1.npz'
    write_graph(path)
    arrays = dict(np.load(path))
    np.savez(path, **{**arrays, 'y': arrays['y'].astype(np.float64)})
    with pytest.raises(SystemExit) as e:
        paper_runs(tmp_path, tmp_path / 'o')
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert 'argument --paper-data: ' in err
    assert "the array 'y' must hold integers" in err


def test_missing_paper_data_says_where_it_comes_from(tmp_path, capsys):
    # The authors' graphs are not shipped (their repository states no
    # licence): the error says where they come from and how to place them.
    with pytest.raises(SystemExit) as e:
        table2.parse_args(
            ['--paper-data', str(tmp_path), '--out-dir', str(tmp_path / 'o')]
        )
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    path = str(tmp_path / 'neighbor_dependent_k1.npz')
    assert f'argument --paper-data: no such .npz file: {path!r}; ' in err
    assert 'https://github.com/RelationalML/GATE, states no licence' in err
    assert 'arrays x, edge_index, y, train_mask, val_mask and test_mask' in err
    assert not (tmp_path / 'o').exists()


def paper_runs(folder, out, *argv):
    args = table2.parse_args(
        ['--ks', '1', '--paper-data', str(folder), '--out-dir', str(out)]
        + list(argv)
    )
    return args, {store.run_id(c) for c in table2.configs(args)}


def test_runs_on_other_paper_data_have_other_names(tmp_path):
    # Every --paper-data folder was source 'paper': --resume took the runs
    # made on one folder's graphs for those of another.
    for name, seed in (('a', 0), ('b', 1), ('a2', 0)):
        os.mkdir(tmp_path / name)  # a2: a's graph, written otherwise
        path = tmp_path / name / 'neighbor_dependent_k1.npz'
        write_graph(path, seed=seed, compressed=name == 'a2')
    a, runs_a = paper_runs(tmp_path / 'a', tmp_path / 'o')
    b, runs_b = paper_runs(tmp_path / 'b', tmp_path / 'o')
    a2, runs_a2 = paper_runs(tmp_path / 'a2', tmp_path / 'o')
    assert a.source.startswith('paper-') and len(a.source) == 18
    assert a.source != b.source and not runs_a & runs_b
    assert a2.source == a.source and runs_a2 == runs_a
    # --tables-only reads them too: the tables of a's runs
    only, runs = paper_runs(tmp_path / 'a', tmp_path / 'o', '--tables-only')
    assert only.source == a.source and runs == runs_a


@needs_shared('gate-synthetic')
def test_the_authors_graphs_keep_the_committed_runs(tmp_path):
    # The committed runs on the authors' graphs are source 'paper': their
    # graphs keep that name (and --tables-only without the files too).
    committed = {
        name.rsplit('_', 1)[-1]
        for name in os.listdir(
            osp.join(ROOT, 'gate_paper', 'runs', 'table2_paper')
        )
        if name.endswith('.json')
    }
    for folder, argv in (
        (shared('gate-synthetic'), []),
        (tmp_path / 'missing', ['--tables-only']),
    ):
        args = table2.parse_args(
            ['--paper-data', str(folder), '--out-dir', str(tmp_path / 'o')]
            + argv
        )
        assert args.source == 'paper' and len(committed) == 180
        names = {store.run_id(c) for c in table2.configs(args)}
        assert {n.rsplit('_', 1)[-1] + '.json' for n in names} == committed


def test_out_dir_naming_a_file_is_a_usage_error(tmp_path, capsys):
    # Issue 35, item 15.
    (tmp_path / 'f').write_text('')
    with pytest.raises(SystemExit) as e:
        table2.parse_args(['--out-dir', str(tmp_path / 'f')])
    assert e.value.code == 2
    assert 'is a file, not a folder' in capsys.readouterr().err


@pytest.mark.slow
def test_tiny_run_on_paper_data(tmp_path):
    write_graph(tmp_path / 'neighbor_dependent_k1.npz')
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    argv = '--quick --ks 1 --extra-depths 0 --models GATE GAT --max-epochs 10'
    argv = argv.split() + ['--no-plots', '--paper-data', str(tmp_path),
                           '--out-dir', str(tmp_path / 'runs')]  # fmt: skip
    (out,) = run_in_one_interpreter(
        [module('gate_paper.table2', *argv)], env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr
    records = store.load(str(tmp_path / 'runs'))
    assert len(records) == 4  # 2 models x 2 seeds
    source = table2.paper_source(
        1, graph_digest(npz_graph(str(tmp_path / 'neighbor_dependent_k1.npz')))
    )
    assert {r['config']['source'] for r in records} == {source} != {'paper'}
    summary = (tmp_path / 'runs' / 'table2_summary.csv').read_text()
    row = summary.splitlines()[1].split(',')
    assert row[:2] == ['1', '1'] and ' ± ' in row[2]


def test_a_diverged_run_is_counted_not_averaged():
    # Its NaN accuracy made the whole cell "nan ± nan".
    def record(seed, status):
        config = dict(dataset='k1', num_layers=1, model='GATE', seed=seed)
        result = {}
        if status == 'finished':
            result = dict.fromkeys(synthetic.RESULTS, 1.0)
            result.update(test_acc_at_min_loss=0.5 + seed / 10,
                          final_alpha_vv_mean=[0.5])  # fmt: skip
        return {'config': config, 'status': status, 'result': result}

    records = [record(0, 'finished'), record(1, 'finished')]
    records.append(record(2, 'diverged'))
    summary = dict((n, t) for n, _, t in table2.tables(
        records, [1], [0], ['GATE'], [0, 1, 2]
    ))['summary']  # fmt: skip
    assert summary.loc[0, 'GATE (ours)'] == '55.0 ± 63.5 (1 diverged)'
    records[0]['status'] = records[1]['status'] = 'diverged'
    records[0]['result'] = records[1]['result'] = {}
    summary = dict((n, t) for n, _, t in table2.tables(
        records, [1], [0], ['GATE'], [0, 1, 2]
    ))['summary']  # fmt: skip
    assert summary.loc[0, 'GATE (ours)'] == '- (3 diverged)'
