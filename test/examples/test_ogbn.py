import gzip
import json
import os
import os.path as osp
import subprocess
import sys

import pytest
import torch
from torch_geometric.testing import withPackage

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
EXAMPLES = osp.join(ROOT, 'examples')

pytest.importorskip('ogb')
sys.path.insert(0, EXAMPLES)
import ogbn  # noqa: E402


def _csv(path, rows):
    os.makedirs(osp.dirname(path), exist_ok=True)
    with gzip.open(path, 'wt') as f:
        for row in rows:
            if isinstance(row, (list, tuple)):
                f.write(','.join(str(v) for v in row) + '\n')
            else:
                f.write(f'{row}\n')


def _graph(num_nodes, num_classes, seed):
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(num_classes, (num_nodes,), generator=gen)
    x = torch.randn(num_nodes, 8, generator=gen)
    x[:, :num_classes] += 4.0 * torch.eye(num_classes)[y]
    # Directed edges, mostly within a class (arxiv's citations are directed).
    src = torch.randint(num_nodes, (4 * num_nodes,), generator=gen)
    dst = torch.randint(num_nodes, (4 * num_nodes,), generator=gen)
    keep = (y[src] == y[dst]) | (torch.rand(src.numel(), generator=gen) < 0.3)
    keep &= src != dst
    edge_index = torch.stack([src[keep], dst[keep]])
    perm = torch.randperm(num_nodes, generator=gen)
    a, b = num_nodes // 2, 3 * num_nodes // 4
    return x, y, edge_index, (perm[:a], perm[a:b], perm[b:])


def write_fake_arxiv(root, num_nodes=120, num_classes=3, seed=0, relabel=None):
    r"""A small graph in ogbn-arxiv's on-disk layout (what
    :class:`PygNodePropPredDataset` reads; no download is attempted because
    the raw files and the release marker exist). :obj:`relabel` replaces the
    labels of the validation and test nodes with this class."""
    x, y, edge_index, (train, valid, test) = _graph(
        num_nodes, num_classes, seed
    )
    if relabel is not None:
        y = y.clone()
        y[torch.cat([valid, test])] = relabel
    base = osp.join(root, 'ogbn_arxiv')
    raw = osp.join(base, 'raw')
    _csv(osp.join(raw, 'edge.csv.gz'), edge_index.t().tolist())
    _csv(osp.join(raw, 'node-feat.csv.gz'), x.tolist())
    _csv(osp.join(raw, 'node-label.csv.gz'), y.tolist())
    _csv(osp.join(raw, 'node_year.csv.gz'), [2020] * num_nodes)
    _csv(osp.join(raw, 'num-node-list.csv.gz'), [num_nodes])
    _csv(osp.join(raw, 'num-edge-list.csv.gz'), [edge_index.size(1)])
    for name, idx in (('train', train), ('valid', valid), ('test', test)):
        _csv(osp.join(base, 'split', 'time', f'{name}.csv.gz'), idx.tolist())
    open(osp.join(base, 'RELEASE_v1.txt'), 'w').close()
    return x, y, edge_index, (train, valid, test)


def write_fake_mag(root, num_nodes=100, num_classes=3, seed=1):
    r"""A small heterogeneous graph in ogbn-mag's on-disk layout: papers
    (features, labels, split, citations) and authors who write them."""
    x, y, cites, (train, valid, test) = _graph(num_nodes, num_classes, seed)
    num_authors = 30
    writes = torch.stack(
        [
            torch.randint(num_authors, (200,)),
            torch.randint(num_nodes, (200,)),
        ]
    )
    base = osp.join(root, 'ogbn_mag')
    raw = osp.join(base, 'raw')
    with gzip.open(osp.join(_mk(raw), 'num-node-dict.csv.gz'), 'wt') as f:
        f.write(f'author,paper\n{num_authors},{num_nodes}\n')
    _csv(
        osp.join(raw, 'triplet-type-list.csv.gz'),
        [('author', 'writes', 'paper'), ('paper', 'cites', 'paper')],
    )
    for triplet, ei in (
        ('author___writes___paper', writes),
        ('paper___cites___paper', cites),
    ):
        rel = osp.join(raw, 'relations', triplet)
        _csv(osp.join(rel, 'edge.csv.gz'), ei.t().tolist())
        _csv(osp.join(rel, 'num-edge-list.csv.gz'), [ei.size(1)])
    _csv(osp.join(raw, 'node-feat', 'paper', 'node-feat.csv.gz'), x.tolist())
    _csv(osp.join(raw, 'node-label', 'paper', 'node-label.csv.gz'), y.tolist())
    with gzip.open(osp.join(raw, 'nodetype-has-label.csv.gz'), 'wt') as f:
        f.write('author,paper\nFalse,True\n')
    split = osp.join(base, 'split', 'time')
    for name, idx in (('train', train), ('valid', valid), ('test', test)):
        _csv(osp.join(split, 'paper', f'{name}.csv.gz'), idx.tolist())
    with gzip.open(osp.join(split, 'nodetype-has-split.csv.gz'), 'wt') as f:
        f.write('author,paper\nFalse,True\n')
    open(osp.join(base, 'RELEASE_v2.txt'), 'w').close()
    return x, y, cites, (train, valid, test)


def _mk(path):
    os.makedirs(path, exist_ok=True)
    return path


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    # Loading the fake datasets must never try to download anything.
    import urllib.request

    def refuse(*args, **kwargs):
        raise AssertionError('network access attempted')

    monkeypatch.setattr(urllib.request, 'urlopen', refuse)


def test_load_ogb_reads_the_on_disk_format(tmp_path):
    x, y, edge_index, (train, valid, test) = write_fake_arxiv(str(tmp_path))
    data, split, num_classes = ogbn.load_ogb('ogbn-arxiv', str(tmp_path))
    assert num_classes == 40  # OGB's meta data, not the fake graph's
    assert torch.allclose(data.x, x)
    assert torch.equal(data.y.view(-1), y) and data.y.shape == (120, 1)
    assert torch.equal(split['train'], train)
    assert torch.equal(split['test'], test)
    # Every directed citation is there in both directions, nothing else.
    pairs = set(map(tuple, data.edge_index.t().tolist()))
    expected = set(map(tuple, edge_index.t().tolist()))
    expected |= {(j, i) for i, j in expected}
    assert pairs == expected

    x, y, cites, (train, _, _) = write_fake_mag(str(tmp_path))
    data, split, num_classes = ogbn.load_ogb('ogbn-mag', str(tmp_path))
    assert num_classes == 349
    assert torch.allclose(data.x, x) and torch.equal(data.y.view(-1), y)
    assert torch.equal(split['train'], train)
    pairs = set(map(tuple, data.edge_index.t().tolist()))
    expected = set(map(tuple, cites.t().tolist()))
    assert pairs == expected | {(j, i) for i, j in expected}


def test_estimate_and_memory_constants():
    # The constants in MEMORY_BYTES must describe the installed layers: if
    # this fails, the layers' memory changed; paste the output of
    # `python examples/ogbn.py --calibrate-memory` into MEMORY_BYTES.
    measured = ogbn.calibrate_memory(num_nodes=500)
    for model, per in ogbn.MEMORY_BYTES.items():
        for key in ('edge', 'edge_fixed', 'node'):
            assert measured[model][key] == pytest.approx(
                per[key], rel=0.25, abs=1.0
            )
    # The estimate grows linearly with the edges and the layers.
    args = dict(
        num_nodes=1000,
        num_features=8,
        hidden_channels=64,
        num_classes=64,
        num_params=0,
    )
    one = ogbn.estimate_full_batch_bytes(
        'GATE', num_edges=0, num_layers=1, **args
    )
    two = ogbn.estimate_full_batch_bytes(
        'GATE', num_edges=0, num_layers=2, **args
    )
    more = ogbn.estimate_full_batch_bytes(
        'GATE', num_edges=1000, num_layers=1, **args
    )
    feats = 4 * 1000 * 8
    assert two - feats == pytest.approx(2 * (one - feats), abs=1)
    per = ogbn.MEMORY_BYTES['GATE']
    assert more - one == pytest.approx(
        ogbn.PEAK_FACTOR * 1000 * (64 * per['edge'] + per['edge_fixed']),
        abs=1,
    )


def _run(*argv, out):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    proc = subprocess.run(
        [sys.executable, osp.join(EXAMPLES, 'ogbn.py'), *argv, '--out', out],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out) as f:
        return proc.stdout, json.load(f)


def test_full_batch_end_to_end(tmp_path):
    write_fake_arxiv(str(tmp_path / 'a'))
    common = [
        '--dataset',
        'ogbn-arxiv',
        '--num-layers',
        '2',
        '--hidden-channels',
        '16',
        '--lr',
        '0.02',
        '--epochs',
        '30',
        '--eval-every',
        '10',
        '--memory-budget',
        '1',
    ]
    stdout, res = _run(
        '--root',
        str(tmp_path / 'a'),
        *common,
        '--runs',
        '2',
        out=str(tmp_path / 'a.json'),
    )
    assert 'fits): full-batch training' in stdout
    assert res['mode'] == 'full' and len(res['runs']) == 2
    for run in res['runs']:
        losses = [row['loss'] for row in run['history']]
        assert losses[-1] < 0.7 * losses[0]
        evals = [row for row in run['history'] if 'valid' in row]
        assert [row['epoch'] for row in evals] == [10, 20, 30]
        best = max(evals, key=lambda row: row['valid'])
        assert (run['valid'], run['test']) == (best['valid'], best['test'])
        # 3 classes (chance 1/3) with well separated features:
        assert run['valid'] > 0.55 and evals[-1]['train'] > 0.75
    # Different seeds, different runs:
    assert res['runs'][0]['history'] != res['runs'][1]['history']

    # Validation and test labels never enter the loss: the same graph with
    # every validation and test label changed trains identically.
    write_fake_arxiv(str(tmp_path / 'b'), relabel=0)
    _, other = _run(
        '--root',
        str(tmp_path / 'b'),
        *common,
        '--runs',
        '2',
        out=str(tmp_path / 'b.json'),
    )
    for run, run_b in zip(res['runs'], other['runs']):
        assert [r['loss'] for r in run['history']] == [
            r['loss'] for r in run_b['history']
        ]
        assert [r['train'] for r in run['history'] if 'train' in r] == [
            r['train'] for r in run_b['history'] if 'train' in r
        ]


def test_arguments_are_checked(tmp_path):
    with pytest.raises(SystemExit):
        ogbn.parse_args(['--num-layers', '3', '--num-neighbors', '5', '5'])
    with pytest.raises(SystemExit):
        ogbn.parse_args(['--epochs', '0'])
    args = ogbn.parse_args(['--dataset', 'ogbn-products'])
    assert (args.num_layers, args.hidden_channels, args.lr) == (8, 128, 1e-3)
    assert args.num_neighbors == [5] * 8
    with pytest.raises(ValueError, match="'GATE' or 'GATv2'"):
        ogbn.build_model('GCN', 8, 16, 2, 3)


@withPackage('torch_sparse')
def test_mini_batch_matches_full_batch(tmp_path):
    write_fake_arxiv(str(tmp_path))
    data, split, _ = ogbn.load_ogb('ogbn-arxiv', str(tmp_path))
    args = ogbn.parse_args(
        [
            '--num-layers',
            '3',
            '--hidden-channels',
            '16',
            '--num-neighbors',
            '-1',
            '--batch-size',
            '1000',
            '--inference-batch-size',
            '7',
        ]
    )
    train_loader, subgraph_loader = ogbn.make_loaders(
        data, split['train'], args
    )
    losses, preds = [], []
    for mode in ('full', 'mini'):
        torch.manual_seed(0)
        model = ogbn.build_model('GATE', 8, 16, 3, 3)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if mode == 'full':
            loss = ogbn.train_full(model, opt, data, split['train'])
            pred = ogbn.predict(model, data, None, 'cpu')
        else:  # one batch of all training nodes, every neighbour, trimmed
            loss = ogbn.train_mini(model, opt, train_loader, 'cpu')
            pred = ogbn.predict(model, data, subgraph_loader, 'cpu')
        losses.append(loss)
        preds.append(pred)
        model.eval()
        with torch.no_grad():
            out = model(data.x, data.edge_index)
            if mode == 'mini':  # layer-wise inference, 7 nodes at a time
                assert torch.allclose(
                    model.inference(subgraph_loader), out, atol=1e-5
                )
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    assert torch.equal(preds[0], preds[1])


@withPackage('torch_sparse')
def test_mini_batch_end_to_end(tmp_path):
    write_fake_arxiv(str(tmp_path / 'a'))
    common = [
        '--dataset',
        'ogbn-arxiv',
        '--num-layers',
        '2',
        '--hidden-channels',
        '16',
        '--lr',
        '0.01',
        '--epochs',
        '12',
        '--eval-every',
        '4',
        '--batch-size',
        '16',
        '--num-neighbors',
        '4',
        '--memory-budget',
        '0',
    ]
    stdout, res = _run(
        '--root', str(tmp_path / 'a'), *common, out=str(tmp_path / 'a.json')
    )
    assert 'does not fit): mini-batch training (NeighborLoader' in stdout
    assert res['mode'] == 'mini'
    losses = [row['loss'] for row in res['runs'][0]['history']]
    assert losses[-1] < 0.7 * losses[0]
    assert res['runs'][0]['valid'] > 0.6

    # The sampled batches hold only training seeds: changing every
    # validation and test label changes nothing in training.
    write_fake_arxiv(str(tmp_path / 'b'), relabel=0)
    _, other = _run(
        '--root', str(tmp_path / 'b'), *common, out=str(tmp_path / 'b.json')
    )
    assert losses == [row['loss'] for row in other['runs'][0]['history']]
