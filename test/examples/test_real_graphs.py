import csv
import math
import os
import os.path as osp
import shutil
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
EXAMPLES = osp.join(ROOT, 'examples')
DATA = os.environ.get(
    'GATE_SHARED_DATA', osp.join(ROOT, '..', 'shared', 'data')
)


@pytest.fixture(scope='module')
def rg():
    pytest.importorskip('sklearn')
    pytest.importorskip('tqdm')
    sys.path.insert(0, EXAMPLES)
    try:
        import real_graphs
    finally:
        sys.path.remove(EXAMPLES)
    return real_graphs


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
    return edges


REAL_GRAPHS = osp.join(EXAMPLES, 'real_graphs.py')


def _run(*argv, script=REAL_GRAPHS):
    r"""Runs ``script`` (``examples/real_graphs.py`` or a benchmark over its
    runs) on one thread; it must succeed."""
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    proc = subprocess.run(
        [sys.executable, script, *argv],
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


def test_metrics_against_sklearn_and_by_hand(rg):
    from _experiment import metrics
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    def m_of(out, y, mask):
        return {
            k: float(v)
            for k, v in metrics(out, y, mask.nonzero().view(-1)).items()
        }

    y = torch.tensor([0, 0, 0, 1, 1])
    p1 = torch.tensor([0.2, 0.7, 0.4, 0.6, 0.9])
    out = torch.stack([torch.log(1 - p1), torch.log(p1)], dim=-1)
    mask = torch.tensor([True, True, True, True, False])
    m = m_of(out, y, mask)  # the unmasked node 4 does not count
    # Positive 0.6 beats the negatives 0.2 and 0.4, not 0.7: AUC 2/3.
    assert m['roc_auc'] == pytest.approx(2 / 3)
    # Labels [0, 1, 0, 1]: accuracy 3/4, recall 2/3 and 1/1: balanced 5/6.
    assert m['acc'] == pytest.approx(3 / 4)
    assert m['bal_acc'] == pytest.approx(5 / 6)

    gen = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (200,), generator=gen)
    out = torch.randn(200, 2, generator=gen)
    mask = torch.rand(200, generator=gen) < 0.5
    m = m_of(out, y, mask)
    prob = out.softmax(-1)[:, 1]
    assert m['roc_auc'] == pytest.approx(roc_auc_score(y[mask], prob[mask]))
    assert m['bal_acc'] == pytest.approx(
        balanced_accuracy_score(y[mask], out.argmax(-1)[mask])
    )
    # More than two classes: no ROC AUC.
    y3 = torch.randint(0, 3, (50,), generator=gen)
    out3 = torch.randn(50, 3, generator=gen)
    assert math.isnan(m_of(out3, y3, torch.ones(50, dtype=bool))['roc_auc'])


def test_heterophilous_loader_and_split_masks(rg, tmp_path):
    edges = write_heterophilous(str(tmp_path), 'Roman-empire', num_classes=3)
    # Loaded by name through PyG's class: the raw file is there, so no
    # download; the graph is made undirected unless raw edges are asked for.
    data, num_classes = rg.load_dataset('Roman-empire', str(tmp_path))
    assert num_classes == 3 and data.train_mask.size() == (60, 10)
    assert data.edge_index.size(1) == 2 * len(edges)
    raw, _ = rg.load_dataset('Roman-empire', str(tmp_path), raw_edges=True)
    assert raw.edge_index.t().tolist() == edges.tolist()

    for split in range(10):
        train, val, test = rg.split_masks(data, split)
        assert torch.equal(train, data.train_mask[:, split])
        assert torch.equal(test, data.test_mask[:, split])
        assert not (train & test).any() and not (train & val).any()
    with pytest.raises(ValueError, match='split 10 does not exist'):
        rg.split_masks(data, 10)
    data.train_mask[0, 3] = data.test_mask[0, 3] = True
    with pytest.raises(ValueError, match='training and test'):
        rg.split_masks(data, 3)
    # A dataset with a single split (Planetoid) serves every split index:
    data.train_mask = data.train_mask[:, :1]
    data.val_mask, data.test_mask = data.val_mask[:, :1], data.test_mask[:, :1]
    assert torch.equal(rg.split_masks(data, 7)[0], data.train_mask[:, 0])


def test_test_labels_never_enter_training(rg, tmp_path):
    write_heterophilous(str(tmp_path), 'Minesweeper')
    data, num_classes = rg.load_dataset('Minesweeper', str(tmp_path))
    task = rg.Task(
        dataset='Minesweeper',
        recipe='paper',
        model='GATE',
        num_layers=2,
        split=4,
        seed=0,
        edges='undirected',
        features='raw',
        hidden=8,
        heads=1,
        dropout=0.0,
        eps=0.3,
        lr=0.01,
        max_epochs=8,
        patience=100,
    )

    def run(data):
        torch.manual_seed(0)
        model = rg.real_graph_model(task, data.num_features, num_classes)
        return rg.fit(model, data, task)

    first = run(data)
    flipped = data.clone()
    test = data.test_mask[:, 4]
    flipped.y = data.y.clone()
    flipped.y[test] = 1 - data.y[test]
    second = run(flipped)
    # Same training and selection, only the test metrics differ:
    same = ('best_epoch', 'val_metric', 'train_metric', 'alpha_vv_mean')
    for name in same:
        assert getattr(first, name) == getattr(second, name), name
    assert first.test_acc == pytest.approx(1 - second.test_acc)
    assert first.test_roc_auc == pytest.approx(1 - second.test_roc_auc)
    assert first.metric == 'roc_auc' and first.epochs_run == 8


def test_models_and_recipes(rg):
    base = rg.Task(
        'Texas',
        'paper',
        'GAT-sep',
        3,
        0,
        0,
        'undirected',
        'raw',
        8,
        2,
        0.0,
        0.3,
        0.01,
        5,
        5,
    )
    with pytest.raises(ValueError, match='only in the strong recipe'):
        rg.real_graph_model(base, 10, 3)
    x = torch.randn(12, 10)
    edge_index = torch.randint(0, 12, (2, 40))
    for recipe in rg.RECIPES:
        for name in rg.MODELS:
            if recipe == 'paper' and name in rg.STRONG_ONLY:
                continue
            task = replace(base, recipe=recipe, model=name)
            model = rg.real_graph_model(task, 10, 3)
            out, alphas = model.forward_with_self_attention(x, edge_index)
            assert out.size() == (12, 3), (recipe, name)
            # alpha_vv of every attention layer with a self-loop:
            expected = {
                'GAT': 3,
                'GATv2': 3,
                'MLP+GAT': 2,
                'GATE': 3,
                'GATE_S': 3,
                'GATE-sep': 3,
            }.get(name, 0)
            assert len(alphas) == expected, (recipe, name)
    # MLP+GAT alternates GAT and linear layers, GAT first:
    task = replace(base, model='MLP+GAT', num_layers=4)
    kinds = [type(m).__name__ for m in rg.real_graph_model(task, 10, 3).layers]
    assert kinds == ['GATv2Conv', 'Linear', 'GATv2Conv', 'Linear']


def test_quick_on_generated_heterophilous_graph(tmp_path):
    pytest.importorskip('sklearn')
    pytest.importorskip('matplotlib')
    write_heterophilous(str(tmp_path / 'data'), 'Minesweeper')
    out = str(tmp_path / 'out')
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
        out,
    ]
    _run(
        *common,
        '--recipes',
        'paper',
        '--models',
        'GATE',
        'MLP',
        '--splits',
        *map(str, range(10)),
    )
    rows = _rows(osp.join(out, 'results.csv'))
    assert sorted((r['model'], int(r['split'])) for r in rows) == sorted(
        (m, s) for m in ('GATE', 'MLP') for s in range(10)
    )
    assert {r['metric'] for r in rows} == {'roc_auc'}
    assert {r['seed'] for r in rows} == {str(s) for s in range(10)}
    for r in rows:
        assert 0 <= float(r['test_roc_auc']) <= 1
        assert 1 <= int(r['best_epoch']) <= int(r['epochs_run']) == 3
    plots = os.listdir(osp.join(out, 'plots'))  # split 0, attention only
    assert sorted(plots) == [
        'Minesweeper_paper_L2_GATE_split0_alpha_best.png',
        'Minesweeper_paper_L2_GATE_split0_alpha_history.png',
    ]
    summary = _rows(osp.join(out, 'results_summary.csv'))
    gate = next(r for r in summary if r['model'] == 'GATE')
    assert gate['test_n'] == '10'  # numbers: mean, ci, n per column
    assert 0 <= float(gate['test_mean']) <= 100
    # The binary set's second selection, on validation balanced accuracy:
    for r in rows:
        assert 1 <= int(r['bal_best_epoch']) <= 3
        assert 0 <= float(r['bal_test_bal_acc']) <= 1
    assert gate['paper'].startswith('66.14 ± 1.57 (L=5')

    # Resuming adds the strong recipe with one-direction edges and keeps
    # the finished runs.
    _run(
        *common,
        '--recipes',
        'strong',
        '--models',
        'GATE-sep',
        '--raw-edges',
        '--resume',
        '--no-plots',
    )
    again = _rows(osp.join(out, 'results.csv'))
    assert again[:20] == rows
    assert [(r['recipe'], r['edges']) for r in again[20:]] == [
        ('strong', 'raw')
    ] * 2


@pytest.mark.skipif(
    not osp.isdir(osp.join(DATA, 'WebKB')), reason='needs ../shared/data'
)
def test_quick_on_a_copy_of_texas(tmp_path):
    pytest.importorskip('sklearn')
    shutil.copytree(osp.join(DATA, 'WebKB'), tmp_path / 'data' / 'WebKB')
    out = str(tmp_path / 'out')
    _run(
        '--quick',
        '--data-root',
        str(tmp_path / 'data'),
        '--models',
        'GAT',
        'GATE',
        '--recipes',
        'paper',
        '--max-epochs',
        '5',
        '--no-plots',
        '--out-dir',
        out,
    )
    rows = _rows(osp.join(out, 'results.csv'))
    assert sorted((r['model'], r['split']) for r in rows) == [
        ('GAT', '0'),
        ('GAT', '1'),
        ('GATE', '0'),
        ('GATE', '1'),
    ]
    assert {r['metric'] for r in rows} == {'acc'}
    assert {r['lr'] for r in rows} == {'0.01'}  # Appendix C, Texas, L=2
    # The input's Dirichlet energy over all pairs, as in Appendix D:
    assert float(rows[0]['energy_all_input']) == pytest.approx(
        1.945e6, rel=1e-3
    )
    summary = _rows(osp.join(out, 'results_summary.csv'))
    assert [r['paper'] for r in summary] == ['56.7*', '67.6*']


@pytest.mark.skipif(
    not osp.isdir(osp.join(DATA, 'Planetoid')), reason='needs ../shared/data'
)
def test_planetoid_features_as_the_paper_used_them(rg, tmp_path):
    from torch_geometric_gate.utils import dirichlet_energy

    shutil.copytree(osp.join(DATA, 'Planetoid'), tmp_path / 'Planetoid')
    data, _ = rg.load_dataset('Cora', str(tmp_path))
    # Appendix D's input energy of Cora (5.088e5 all pairs, 6.490e2
    # adjacent) is that of the row-normalised features:
    assert float(dirichlet_energy(data.x.double())) == pytest.approx(
        5.088e5, rel=1e-3
    )
    assert float(
        dirichlet_energy(data.x.double(), data.edge_index)
    ) == pytest.approx(6.490e2, rel=1e-3)
    raw, _ = rg.load_dataset('Cora', str(tmp_path), normalize=False)
    assert set(raw.x.unique().tolist()) == {0.0, 1.0}
    assert data.train_mask.size() == (2708, 1)  # one public split


@pytest.mark.parametrize(
    'stem,runs,datasets,patience',
    [
        ('small_paper', 'small_paper_results.csv', ['Texas', 'Wisconsin',
                                                    'Cora'], '300'),
        ('citeseer_paper', 'paper_cpu/results.csv', ['CiteSeer'], '100'),
        ('actor_paper', 'paper_cpu/results.csv', ['Actor'], '100'),
        ('minesweeper_paper', 'paper_cpu_minesweeper/results.csv',
         ['Minesweeper'], '100'),
    ],
)  # fmt: skip
def test_docs_tables_recompute_from_the_committed_runs(
    tmp_path, stem, runs, datasets, patience
):
    # The results page's tables are what the committed per-run CSVs give:
    data = osp.join(ROOT, 'docs', 'source', '_data', 'real_graphs')
    rows = open(osp.join(data, runs)).read().splitlines(keepends=True)
    with open(tmp_path / 'results.csv', 'w') as f:  # only these datasets
        f.writelines(
            [rows[0]] + [r for r in rows[1:] if r.split(',')[0] in datasets]
        )
    subprocess.run(
        [
            sys.executable,
            osp.join(ROOT, 'examples', 'real_graphs.py'),
            '--tables-only',
            '--datasets',
            *datasets,
            '--patience',
            patience,
            '--out-dir',
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
    )
    script = osp.join(
        ROOT, 'docs', 'source', '_scripts', 'real_graphs_table.py'
    )
    # The binary sets: ROC AUC without the paper's columns (balanced
    # accuracy), and the balanced accuracy that the paper reports.
    tables = {'table': []}
    if datasets == ['Minesweeper']:
        tables = {
            'table': ['--no-paper'],
            'bal_acc_table': ['--column', 'bal_sel_test_bal_acc'],
        }
    for name, options in tables.items():
        table = subprocess.run(
            [sys.executable, script, str(tmp_path / 'results_summary.csv')]
            + options,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        assert table == open(osp.join(data, f'{stem}_{name}.csv')).read()
    assert (tmp_path / 'results_summary.csv').read_text() == open(
        osp.join(data, f'{stem}_summary.csv')
    ).read()
