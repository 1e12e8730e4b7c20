import json
import os
import os.path as osp
import shutil

import numpy as np
import pytest
import torch
from data_testing import (
    copy_shared,
    dead_url,
    local_url,
    needs_shared,
    serve,
    shared,
)
from torch_geometric.datasets import WebKB

from gate_paper import data as gp_data
from gate_paper import real_graphs, store

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
RUNS = osp.join(ROOT, 'gate_paper', 'runs')


def write_heterophilous(root, name, num_nodes=60, num_classes=2, seed=0):
    r"""A random graph in the raw format of PyG's
    ``HeterophilousGraphDataset`` (``<root>/heterophilous/<name>/raw/
    <name>.npz``): each edge once, ``[10, N]`` masks, 50/25/25 splits."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, num_nodes, size=(3 * num_nodes, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    edges = np.unique(np.sort(edges, axis=1), axis=0)
    labels = np.arange(num_nodes) % num_classes
    train, val, test = (np.zeros((10, num_nodes), bool) for _ in range(3))
    for i in range(10):
        perm = rng.permutation(num_nodes)
        train[i, perm[: num_nodes // 2]] = True
        val[i, perm[num_nodes // 2 : 3 * num_nodes // 4]] = True
        test[i, perm[3 * num_nodes // 4 :]] = True
    key = name.lower().replace('-', '_')
    raw = osp.join(root, 'heterophilous', key, 'raw')
    os.makedirs(raw)
    np.savez(
        osp.join(raw, f'{key}.npz'),
        node_features=rng.normal(size=(num_nodes, 7)).astype(np.float32),
        node_labels=labels,
        edges=edges,
        train_masks=train,
        val_masks=val,
        test_masks=test,
    )


def runs_in(folder):
    return {
        name: json.load(open(osp.join(folder, name)))
        for name in sorted(os.listdir(folder))
        if name.endswith('.json')
    }


def test_offline_is_a_usage_error_before_any_folder(
    tmp_path, monkeypatch, capsys
):
    # Without network (a server that is down): a usage error naming the
    # files and the root, before any folder is made.
    monkeypatch.setattr(WebKB, 'url', dead_url(WebKB.url))
    out = tmp_path / 'runs'
    with pytest.raises(SystemExit) as e:
        real_graphs.parse_args(
            ['--data-root', str(tmp_path / 'nowhere'), '--out-dir', str(out)]
        )
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert 'argument --data-root: could not download Texas (URLError' in err
    assert 'WebKB/texas/raw/out1_node_feature_label.txt' in err
    assert os.listdir(tmp_path) == []


@needs_shared('WebKB', 'texas', 'raw')
def test_quick_downloads_texas(tmp_path, monkeypatch):
    # Issue 46: --quick stopped at once on Texas without ../shared/data; it
    # now gets Texas through PyG's WebKB (from a local server here) into the
    # default data root, ./data.
    raw = shared('WebKB', 'texas', 'raw')
    files = {
        local_url(
            '',
            f'{WebKB.url}/new_data/texas/{f}'
            if f.startswith('out1_')
            else f'{WebKB.url}/splits/{f}',
        ): osp.join(raw, f)
        for f in os.listdir(raw)
    }
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv('GATE_DATA_ROOT', raising=False)
    with serve(files, tmp_path / 'server') as base:
        monkeypatch.setattr(WebKB, 'url', local_url(base, WebKB.url))
        args = real_graphs.parse_args(['--quick', '--out-dir', 'runs'])
    assert args.data_root == 'data' and args.datasets == ['Texas']
    got = tmp_path / 'data' / 'WebKB' / 'texas' / 'raw'
    assert sorted(os.listdir(got)) == sorted(os.listdir(raw))
    data, num_classes = gp_data.load_dataset('Texas', 'data')
    assert (data.num_nodes, num_classes) == (183, 5)


def test_out_dir_that_is_a_file_is_a_usage_error(tmp_path, capsys):
    # It was a raw FileExistsError.
    write_heterophilous(str(tmp_path), 'Minesweeper')
    (tmp_path / 'file').write_text('')
    argv = ['--data-root', str(tmp_path), '--datasets', 'Minesweeper']
    with pytest.raises(SystemExit) as e:
        real_graphs.parse_args(argv + ['--out-dir', str(tmp_path / 'file')])
    assert e.value.code == 2
    assert 'argument --out-dir' in capsys.readouterr().err
    if os.geteuid() != 0:  # root writes into a read-only folder
        locked = tmp_path / 'locked'
        locked.mkdir(mode=0o500)
        with pytest.raises(SystemExit) as e:
            real_graphs.parse_args(argv + ['--out-dir', str(locked)])
        assert e.value.code == 2
        assert 'cannot write into' in capsys.readouterr().err


def test_options_of_one_recipe_are_refused_for_the_other(capsys):
    for argv, flag in (
        (['--heads', '2'], '--heads'),
        (['--recipes', 'strong', '--patience', '5'], '--patience'),
        (['--recipes', 'strong', '--datasets', 'Texas'], '--recipes'),
        (['--splits', '10'], '--splits'),
        (['--datasets', 'Texas', 'Texas'], '--datasets'),
    ):
        with pytest.raises(SystemExit) as e:
            real_graphs.parse_args(argv + ['--tables-only'])
        assert e.value.code == 2
        assert f'argument {flag}' in capsys.readouterr().err


@pytest.mark.parametrize(
    'argv, message',
    [
        (
            # 0 runs, exit 0: the paper recipe has no GATv2
            ['--models', 'GATv2'],
            'argument --models: no run of GATv2 with --recipes paper and '
            "--datasets Texas; the models are the paper recipe's: MLP GAT "
            'MLP+GAT FAGCN GATE GATE_S',
        ),
        (
            ['--recipes', 'paper', 'strong', '--models', 'GATv2', 'GATE'],
            'argument --models: no run of GATv2 with --recipes paper strong '
            "and --datasets Texas; the models are the paper recipe's: MLP "
            "GAT MLP+GAT FAGCN GATE GATE_S; the strong recipe's: GAT GAT-sep "
            'GATv2 GATE GATE-sep (on Minesweeper and Tolokers only)',
        ),
        (
            # a raw traceback in the first run (GATE: Glorot, a warning)
            ['--hidden', '15', '--depths', '1', '2'],
            'argument --hidden: MLP with 2 layers needs an even width for '
            'its looks-linear initialisation (it mirrors the hidden units in '
            'pairs), got 15',
        ),
        (
            ['--hidden', '15', '--models', 'FAGCN', 'GATE'],
            'argument --hidden: GATE with 2 layers needs an even width',
        ),
        (
            # failed inside each run
            ['--datasets', 'Minesweeper', '--recipes', 'strong']
            + ['--hidden', '100'],
            'argument --heads: --hidden (100) must be divisible by --heads '
            '(8)',
        ),
        (
            ['--datasets', 'Minesweeper', '--recipes', 'strong']
            + ['--heads', '3'],
            'argument --heads: --hidden (512) must be divisible by --heads '
            '(3)',
        ),
    ],
)
def test_options_that_make_no_run_or_a_failing_run(
    tmp_path, capsys, argv, message
):
    with pytest.raises(SystemExit) as e:
        real_graphs.parse_args(
            argv + ['--tables-only', '--out-dir', str(tmp_path)]
        )
    assert e.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_odd_widths_where_no_looks_linear_init_needs_pairs(tmp_path):
    for argv in (
        ['--hidden', '15', '--depths', '1'],
        ['--hidden', '15', '--models', 'FAGCN'],
        ['--datasets', 'Minesweeper', '--recipes', 'strong']
        + ['--hidden', '15', '--heads', '5'],
    ):
        args = real_graphs.parse_args(
            argv + ['--tables-only', '--out-dir', str(tmp_path)]
        )
        assert {c['hidden'] for c in real_graphs.configs(args)} == {15}


def test_configs_follow_the_paper_recipe():
    args = real_graphs.parse_args(
        [
            '--datasets',
            'Texas',
            'Minesweeper',
            '--tables-only',
            '--out-dir',
            '/tmp',
        ]
    )
    runs = real_graphs.configs(args)
    # 6 models x 4 depths (Texas) + 6 x 2 (Minesweeper), 10 splits each
    assert len(runs) == (6 * 4 + 6 * 2) * 10
    texas = {
        (c['num_layers'], c['lr']) for c in runs if c['dataset'] == 'Texas'
    }
    # Appendix C: Texas 0.01 up to 5 layers, 0.0005 deeper
    assert texas == {(2, 0.01), (5, 0.01), (10, 0.0005), (20, 0.0005)}
    assert {c['seed'] - c['split'] for c in runs} == {0}
    assert {c['patience'] for c in runs} == {100}


def test_a_run_s_configuration_holds_only_the_options_it_used():
    # --heads 4 --dropout 0.5 went into the paper recipe's runs (which have
    # one head and no dropout whatever they say), and --raw-edges into
    # Texas's (a heterophilous set's option): files claiming what did not
    # run, under new names, so that the committed runs were not reused.
    args = real_graphs.parse_args(
        ['--datasets', 'Texas', 'Minesweeper', '--recipes', 'paper',
         'strong', '--heads', '4', '--dropout', '0.5', '--raw-edges',
         '--tables-only', '--out-dir', '/tmp']
    )  # fmt: skip
    got = {
        (c['dataset'], c['recipe'], c['heads'], c['dropout'], c['edges'])
        for c in real_graphs.configs(args)
    }
    assert got == {
        ('Texas', 'paper', 1, 0.0, 'undirected'),
        ('Minesweeper', 'paper', 1, 0.0, 'raw'),
        ('Minesweeper', 'strong', 4, 0.5, 'raw'),
    }


def test_fagcn_eps_enters_fagcn_runs_only():
    # --fagcn-eps entered every run's configuration: GAT's runs with another
    # epsilon were new runs (new files) of the same computation.
    def eps(*extra):
        args = real_graphs.parse_args(
            ['--datasets', 'Texas', '--models', 'GAT', 'FAGCN',
             '--tables-only', '--out-dir', '/tmp', *extra]
        )  # fmt: skip
        return {c['model']: c['eps'] for c in real_graphs.configs(args)}

    assert eps() == {'GAT': 0.3, 'FAGCN': 0.3}
    assert eps('--fagcn-eps', '0.5') == {'GAT': 0.3, 'FAGCN': 0.5}


def minesweeper_run(**changes):
    r"""A small run of the paper's recipe on (generated) Minesweeper."""
    config = dict(
        dataset='Minesweeper', recipe='paper', model='GATE', num_layers=2,
        split=0, seed=0, edges='undirected', features='raw', hidden=8,
        heads=1, dropout=0.0, eps=0.3, lr=0.01, max_epochs=8, patience=100,
    )  # fmt: skip
    return {**config, **changes}


def test_test_labels_never_enter_training(tmp_path):
    write_heterophilous(str(tmp_path), 'Minesweeper')
    config = minesweeper_run(model='GATE', split=4, max_epochs=8)
    settings = {'root': str(tmp_path), 'device': 'cpu'}
    data, model = real_graphs.prepare(settings, config)
    first = real_graphs.fit(model, data, config)
    flipped = data.clone()
    test = data.test_mask[:, 4]
    flipped.y = data.y.clone()
    flipped.y[test] = 1 - data.y[test]
    _, model = real_graphs.prepare(settings, config)
    second = real_graphs.fit(model, flipped, config)
    # The same training and selection; only the test metrics differ.
    for name in ('best_epoch', 'val_metric', 'train_metric', 'alpha_vv_mean'):
        assert first[name] == second[name], name
    assert first['test_acc'] == pytest.approx(1 - second['test_acc'])
    assert first['test_roc_auc'] == pytest.approx(1 - second['test_roc_auc'])
    assert first['metric'] == 'roc_auc' and first['epochs_run'] == 8


def test_epochs_run_are_the_epochs_trained(tmp_path, monkeypatch):
    # On the binary sets training goes on until the balanced-accuracy
    # selector stops too; epochs_run (and s_per_epoch) were the main
    # selector's last epoch.
    import gate_paper.metrics as gp_metrics

    metrics, calls = gp_metrics.metrics, []

    def flat_roc_auc(out, y, index):  # better balanced accuracy each epoch
        values = metrics(out, y, index)
        calls.append(1)
        values['roc_auc'] = torch.tensor(0.6, dtype=torch.float64)
        values['bal_acc'] = torch.tensor(len(calls) / 1e4).double()
        return values

    monkeypatch.setattr(gp_metrics, 'metrics', flat_roc_auc)
    write_heterophilous(str(tmp_path), 'Minesweeper')
    config = minesweeper_run(model='MLP', max_epochs=30, patience=5)
    settings = {'root': str(tmp_path), 'device': 'cpu'}
    data, model = real_graphs.prepare(settings, config)
    result = real_graphs.fit(model, data, config)
    assert result['best_epoch'] == 1 and result['stopped_early']
    assert result['bal_best_epoch'] == 30
    assert result['epochs_run'] == 30
    assert result['provenance']['epochs_run'] == 30
    assert result['s_per_epoch'] == pytest.approx(result['wall_s'] / 30)


def test_a_run_file_saved_with_a_bom_still_counts(tmp_path, capsys):
    # The results CSV re-saved with a UTF-8 BOM was refused; a run file
    # re-saved so is read as it is.
    folder = tmp_path / 'runs'
    shutil.copytree(osp.join(RUNS, 'real_graphs_minesweeper'), folder)
    argv = [
        '--datasets',
        'Minesweeper',
        '--models',
        'MLP',
        'GAT',
        'MLP+GAT',
        'FAGCN',
        'GATE',
        '--tables-only',
    ]
    real_graphs.main(argv + ['--out-dir', str(folder)])
    before = (folder / 'real_graphs_table.csv').read_text()
    name = sorted(os.listdir(folder))[0]
    text = (folder / name).read_text()
    (folder / name).write_text(text, encoding='utf-8-sig')
    assert (folder / name).read_bytes()[:3] == b'\xef\xbb\xbf'
    real_graphs.main(argv + ['--out-dir', str(folder)])
    assert '100 runs' in capsys.readouterr().out
    assert (folder / 'real_graphs_table.csv').read_text() == before


@pytest.mark.slow
def test_runs_on_a_generated_heterophilous_graph(tmp_path, capsys):
    write_heterophilous(str(tmp_path / 'data'), 'Minesweeper')
    out = tmp_path / 'out'
    common = [
        '--quick',
        '--data-root',
        str(tmp_path / 'data'),
        '--datasets',
        'Minesweeper',
        '--max-epochs',
        '3',
        '--hidden',
        '8',
        '--out-dir',
        str(out),
    ]
    real_graphs.main(
        common + ['--models', 'GATE', 'MLP', '--splits', '0', '1', '2']
    )
    runs = runs_in(out)
    assert sorted(
        (r['config']['model'], r['config']['split']) for r in runs.values()
    ) == sorted((m, s) for m in ('GATE', 'MLP') for s in range(3))
    for r in runs.values():
        res = r['result']
        assert res['metric'] == 'roc_auc' and 0 <= res['test_roc_auc'] <= 1
        assert 1 <= res['best_epoch'] <= res['epochs_run'] == 3
        # the binary set's second selection, on validation balanced accuracy
        assert 1 <= res['bal_best_epoch'] <= 3
    (gate0,) = [  # split 0, attention only: named as its run file
        k[: -len('.json')]
        for k, r in runs.items()
        if r['config']['model'] == 'GATE' and r['config']['split'] == 0
    ]
    assert sorted(os.listdir(out / 'plots')) == [
        f'{gate0}_alpha_best.png',
        f'{gate0}_alpha_history.png',
    ]
    bal = (out / 'real_graphs_bal_acc.csv').read_text()
    assert '66.14 ± 1.57 (L=5; bal. acc.)' in bal  # the paper's GATE
    assert '(n=3)' in bal
    # Resuming adds the strong recipe with one-direction edges and keeps
    # the finished runs as they are.
    real_graphs.main(
        common
        + [
            '--recipes',
            'strong',
            '--models',
            'GATE-sep',
            '--raw-edges',
            '--resume',
            '--no-plots',
        ]
    )
    again = runs_in(out)
    assert {k: again[k] for k in runs} == runs
    new = [r['config'] for k, r in again.items() if k not in runs]
    assert [(c['recipe'], c['edges'], c['heads']) for c in new] == [
        ('strong', 'raw', 2)
    ] * 2


@pytest.mark.slow
def test_a_diverged_run_is_recorded_and_the_tables_go_on(tmp_path):
    write_heterophilous(str(tmp_path / 'data'), 'Minesweeper')
    out = tmp_path / 'out'
    argv = [
        '--quick', '--data-root', str(tmp_path / 'data'), '--datasets',
        'Minesweeper', '--max-epochs', '20', '--hidden', '8', '--lr', '1e9',
        '--models', 'GAT', 'GATE', '--splits', '0', '--no-plots',
        '--out-dir', str(out),
    ]  # fmt: skip
    with pytest.warns(UserWarning, match='diverged'):
        real_graphs.main(argv)
    runs = runs_in(out).values()
    assert 'diverged' in {r['status'] for r in runs}
    for r in runs:  # A diverged run's file says where it ran too:
        p = r['provenance']
        assert p['device'] == 'cpu' and p['dtype'] == 'float32'
        assert 1 <= p['epochs_run'] <= 20
        gate = r['config']['model'] == 'GATE'
        assert (p['kernel'] is not None) == gate, r['config']['model']
    table = (out / 'real_graphs_table.csv').read_text()
    assert '1 diverged' in table  # a cell of a diverged run says so
    # The tables say which score the ROC AUC ranked (it changed once; a
    # run that does not record its score is an earlier one):
    finished = [r for r in runs if r['status'] == 'finished']
    n = len(finished)
    intro = (out / 'real_graphs.md').read_text().split('\n')[2]
    assert f'score: in {n} runs the logit difference (float64)' in intro
    record = finished[0]
    del record['provenance']['roc_auc_score']
    store.save(str(out), record['config'], record['result'],
               record['status'], record.get('message'),
               record['provenance'])  # fmt: skip
    real_graphs.main([*argv, '--tables-only'])
    intro = (out / 'real_graphs.md').read_text().split('\n')[2]
    assert f'in {n - 1} runs the logit' in intro or n == 1
    assert 'in 1 runs (written before runs recorded it) the float32' in intro


@needs_shared('WebKB', 'texas')
@pytest.mark.slow
def test_quick_on_texas_from_the_shared_data(tmp_path):
    out = tmp_path / 'out'
    real_graphs.main(
        [
            '--quick',
            '--data-root',
            copy_shared('WebKB', tmp_path / 'data'),
            '--models',
            'GAT',
            'GATE',
            '--max-epochs',
            '5',
            '--no-plots',
            '--out-dir',
            str(out),
        ]
    )
    runs = runs_in(out)
    assert sorted(
        (r['config']['model'], r['config']['split']) for r in runs.values()
    ) == [('GAT', 0), ('GAT', 1), ('GATE', 0), ('GATE', 1)]
    assert {r['config']['lr'] for r in runs.values()} == {0.01}
    # The input's Dirichlet energy over all pairs, as in Appendix C:
    for r in runs.values():
        assert r['result']['energy_all_input'] == pytest.approx(
            1.945e6, rel=1e-3
        )
    table = (out / 'real_graphs_table.csv').read_text().splitlines()
    assert table[0] == 'dataset,recipe,L,GAT,GATE,paper GAT,paper GATE'
    assert table[1].endswith(',56.7*,67.6*')


@needs_shared('Planetoid', 'Cora')
def test_planetoid_features_as_the_paper_used_them(tmp_path):
    from torch_geometric_gate.utils import dirichlet_energy

    copy_shared('Planetoid', tmp_path)
    data, _ = gp_data.load_dataset('Cora', str(tmp_path))
    # Appendix C's input energy of Cora (5.088e5 all pairs, 6.490e2
    # adjacent) is that of the row-normalised features:
    x = data.x.double()
    assert float(dirichlet_energy(x)) == pytest.approx(5.088e5, rel=1e-3)
    assert float(dirichlet_energy(x, data.edge_index)) == pytest.approx(
        6.490e2, rel=1e-3
    )
    assert torch.equal(data.train_mask.sum(0), torch.tensor([140]))


@pytest.mark.slow
def test_a_second_sweep_keeps_the_first_sweeps_plots(tmp_path):
    # Issue 50, defect 4: the plots were named by dataset, recipe, depth,
    # model and split only; a sweep with another learning rate into the
    # same folder overwrote them.
    write_heterophilous(str(tmp_path / 'data'), 'Minesweeper')
    argv = ['--quick', '--data-root', str(tmp_path / 'data')]
    argv += ['--datasets', 'Minesweeper', '--models', 'GATE', '--splits', '0']
    argv += ['--max-epochs', '2', '--hidden', '8', '--out-dir']
    argv += [str(tmp_path / 'out'), '--resume']
    real_graphs.main(argv + ['--lr', '0.01'])
    first = {
        name: (tmp_path / 'out' / 'plots' / name).read_bytes()
        for name in os.listdir(tmp_path / 'out' / 'plots')
    }
    assert len(first) == 2
    real_graphs.main(argv + ['--lr', '0.02'])
    plots = sorted(os.listdir(tmp_path / 'out' / 'plots'))
    assert len(plots) == 4
    for name, data in first.items():
        assert (tmp_path / 'out' / 'plots' / name).read_bytes() == data


@pytest.mark.parametrize('device', ['gpu', 'cuda:1'])
@pytest.mark.parametrize(
    'script,argv',
    [('real_graphs', ['--data-root', 'data']), ('ogb', ['--root', 'nowhere'])],
)
def test_a_device_that_is_not_here_is_a_usage_error(
    tmp_path, capsys, monkeypatch, device, script, argv
):
    # Any --device was taken: the first run then failed with torch's
    # traceback, after the data was fetched and loaded.
    import importlib

    import torch

    module = importlib.import_module(f'gate_paper.{script}')
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        module.parse_args(['--device', device, *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert 'error: argument --device: expected ' in err
    assert err.endswith(f'got {device!r}')
    assert os.listdir(tmp_path) == []  # (nothing fetched, no folder)
