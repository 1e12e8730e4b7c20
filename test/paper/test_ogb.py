import json
import math
import os

import pytest
import torch

pytest.importorskip('ogb')

from ogb_testing import write_arxiv  # noqa: E402

from gate_paper import ogb  # noqa: E402
from gate_paper.runner import Diverged  # noqa: E402


def write_fake_arxiv(root, num_nodes=80, num_classes=3, seed=0):
    r"""A small graph in ogbn-arxiv's on-disk layout (what
    ``PygNodePropPredDataset`` reads without downloading: raw files, split
    and the release marker); features that reveal the class."""
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(num_classes, (num_nodes,), generator=gen)
    x = torch.randn(num_nodes, 6, generator=gen)
    x[:, :num_classes] += 4.0 * torch.eye(num_classes)[y]
    src = torch.randint(num_nodes, (3 * num_nodes,), generator=gen)
    dst = torch.randint(num_nodes, (3 * num_nodes,), generator=gen)
    keep = src != dst
    edge_index = torch.stack([src[keep], dst[keep]])
    perm = torch.randperm(num_nodes, generator=gen)
    a, b = num_nodes // 2, 3 * num_nodes // 4
    write_arxiv(root, x, y, edge_index, (perm[:a], perm[a:b], perm[b:]))
    return y, perm[b:]


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    import urllib.request

    def refuse(*args, **kwargs):
        raise AssertionError('tried to download')

    monkeypatch.setattr(urllib.request, 'urlopen', refuse)


def test_offline_is_a_usage_error_before_any_folder(
    tmp_path, monkeypatch, capsys
):
    # Without network OGB's download fails: a usage error naming the layout
    # expected and --root, and the folders the download made are removed.
    import urllib.error
    import urllib.request

    def offline(*args, **kwargs):
        raise urllib.error.URLError(ConnectionRefusedError(111, 'refused'))

    monkeypatch.setattr(urllib.request, 'urlopen', offline)
    out, root = tmp_path / 'runs', str(tmp_path / 'nowhere')
    monkeypatch.setattr('builtins.input', lambda *args: 'y')
    with pytest.raises(SystemExit) as e:
        ogb.parse_args(['--root', root, '--out-dir', str(out)])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    folder = os.path.join(root, 'ogbn_arxiv')
    assert err.endswith(
        'error: argument --root: could not download ogbn-arxiv (URLError: '
        '<urlopen error [Errno 111] refused>); expected the layout OGB '
        f'writes under --root {root!r}: {folder}/raw/ and {folder}/split/. '
        'Without network, copy them there from a local copy, or point '
        '--root at a folder that holds them'
    ), err
    assert os.listdir(tmp_path) == []


def test_quick(tmp_path):
    write_fake_arxiv(tmp_path)
    args = ogb.parse_args(
        ['--quick', '--root', str(tmp_path), '--out-dir', str(tmp_path / 'o')]
    )
    assert (args.num_layers, args.hidden, args.epochs) == (3, 64, 20)
    assert args.seeds == [0] and args.lr == ogb.TABLE4_OGB['ogbn-arxiv']['lr']
    args = ogb.parse_args(
        ['--root', str(tmp_path), '--out-dir', str(tmp_path / 'o')]
    )
    assert args.epochs == 2000


def test_table5_settings_are_the_defaults(tmp_path):
    write_fake_arxiv(tmp_path)
    for name, paper in ogb.TABLE4_OGB.items():
        args = ogb.parse_args(
            ['--dataset', name, '--tables-only', '--out-dir', str(tmp_path)]
        )
        assert (args.num_layers, args.hidden, args.lr) == (
            paper['num_layers'],
            ogb.OGB_HIDDEN[name],
            paper['lr'],
        )
    with pytest.raises(SystemExit):
        ogb.parse_args(['--hidden', '10', '--heads', '3', '--tables-only'])


def test_loader_makes_the_graph_undirected_with_ogb_split(tmp_path):
    y, test = write_fake_arxiv(tmp_path)
    data, split, num_classes = ogb.load_ogb('ogbn-arxiv', str(tmp_path))
    assert num_classes == 40  # OGB's declared classes of ogbn-arxiv
    assert torch.equal(data.y, y)
    assert torch.equal(split['test'].sort().values, test.sort().values)
    ei = data.edge_index
    pairs = set(map(tuple, ei.t().tolist()))
    assert all((j, i) in pairs for i, j in pairs)


def test_mini_batches_need_a_sampler(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ogb, 'can_sample', lambda: False)
    write_fake_arxiv(tmp_path)
    with pytest.raises(SystemExit) as e:
        ogb.parse_args(['--root', str(tmp_path), '--mode', 'mini'])
    assert e.value.code == 2
    assert 'pyg-lib or torch-sparse' in capsys.readouterr().err


def nan_run(tmp_path, monkeypatch, when):
    r"""One full-batch run whose model outputs NaN ``when`` it trains
    (``'train'``) or is evaluated (``'eval'``)."""
    write_fake_arxiv(tmp_path)
    build = ogb.build

    def nan_model(c, in_channels, num_classes):
        model = build(c, in_channels, num_classes)
        forward = model.forward

        def nan_forward(*args, **kwargs):
            out = forward(*args, **kwargs)
            return (
                out * math.nan if model.training == (when == 'train') else out
            )

        model.forward = nan_forward
        return model

    monkeypatch.setattr(ogb, 'build', nan_model)
    c = dict(
        dataset='ogbn-arxiv',
        model='GATE',
        num_layers=2,
        hidden=8,
        heads=1,
        lr=0.01,
        epochs=5,
        mode='full',
        batch_size=0,
        num_neighbors='',
        seed=0,
    )
    return ogb.run_one({'root': str(tmp_path), 'device': 'cpu'}, c)


def test_a_nan_loss_is_a_diverged_run(tmp_path, monkeypatch):
    # The accuracy came from the argmax of NaN logits (class 0): a diverged
    # model was a finished run scoring the share of class 0.
    with pytest.raises(Diverged, match='diverged at epoch 1: the loss') as e:
        nan_run(tmp_path, monkeypatch, 'train')
    # What the run knows of itself, for its file:
    facts = e.value.provenance
    assert facts['device'] == 'cpu' and facts['epochs_run'] == 1
    assert facts['kernel'] == 'chunked' and facts['dtype'] == 'float32'


def test_nan_logits_are_never_selected(tmp_path, monkeypatch):
    result = nan_run(tmp_path, monkeypatch, 'eval')
    assert result['best_epoch'] == 0 and result['epochs_run'] == 5
    for key in ('train_acc', 'valid_acc', 'test_acc'):
        assert math.isnan(result[key]), key


@pytest.mark.slow
@pytest.mark.parametrize('mode', ['full', 'mini'])
def test_runs_into_run_files_and_a_table(tmp_path, mode):
    if mode == 'mini' and not ogb.can_sample():
        pytest.skip('NeighborLoader needs pyg-lib or torch-sparse')
    write_fake_arxiv(tmp_path / 'data')

    def argv(out, *seeds):
        return [
            '--root',
            str(tmp_path / 'data'),
            '--out-dir',
            str(out),
            '--num-layers',
            '2',
            '--hidden',
            '8',
            '--lr',
            '0.03',
            '--epochs',
            '40',
            '--mode',
            mode,
            '--device',
            'cpu',
            '--batch-size',
            '16',
            '--seeds',
            *seeds,
        ]

    out = tmp_path / 'runs'
    ogb.main(argv(out, '0', '1'))
    files = sorted(p for p in os.listdir(out) if p.endswith('.json'))
    assert len(files) == 2
    for f in files:
        r = json.load(open(out / f))
        res = r['result']
        assert r['status'] == 'finished'
        assert 1 <= res['best_epoch'] <= res['epochs_run'] == 40
        assert 0.0 <= res['test_acc'] <= 1.0
        # the features reveal the class: a trained model beats chance
        assert res['valid_acc'] > 0.43  # chance: 1/3
    table = (out / 'ogb_table.csv').read_text()
    assert '79.57 ± 0.84' in table and '(n=2)' in table
    # the same seed gives the same run, in a fresh folder
    again = tmp_path / 'again'
    ogb.main(argv(again, '0'))
    (name,) = [p for p in os.listdir(again) if p.endswith('.json')]
    assert name in files
    first, second = (json.load(open(d / name)) for d in (out, again))
    assert first.pop('provenance')['recorded'] is True
    assert second.pop('provenance')['device'] == 'cpu'
    assert first == second  # the provenance's wall time differs


def test_the_table_counts_diverged_runs_apart():
    # Their NaN accuracy made the cell "nan (n=3)".
    def record(seed, status):
        config = dict(dataset='ogbn-arxiv', model='GATE', num_layers=2,
                      mode='full', seed=seed)  # fmt: skip
        result = {'test_acc': 0.7} if status == 'finished' else {}
        return {'config': config, 'status': status, 'result': result}

    table = ogb.table([record(0, 'finished'), record(1, 'diverged')])
    assert table.loc[0, 'test (ours)'] == '70.00 (n=1; 1 diverged)'
    table = ogb.table([record(0, 'diverged'), record(1, 'diverged')])
    assert table.loc[0, 'test (ours)'] == '2 diverged'
