r"""``examples/ogbn.py`` on a tiny graph that the tests write in OGB's
on-disk layout (no OGB data is available offline)."""

import os
import os.path as osp
import re
import shutil
import subprocess
import sys

import pytest
import torch
from data_testing import dead_url
from ogb_testing import write_arxiv
from script_testing import run_in_one_interpreter, script
from torch_geometric.typing import WITH_PYG_LIB, WITH_TORCH_SPARSE

pytest.importorskip('ogb')

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SCRIPT = osp.join(ROOT, 'examples', 'ogbn.py')
SMALL = ['--num-layers', '2', '--hidden-channels', '16', '--lr', '0.02',
         '--epochs', '20']  # fmt: skip
needs_sampler = pytest.mark.skipif(
    not (WITH_PYG_LIB or WITH_TORCH_SPARSE),
    reason="NeighborLoader's sampling needs pyg-lib or torch-sparse",
)


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
    write_arxiv(root, x, y, edge_index, (train, valid, test))
    return x, y, edge_index, (train, valid, test)


# OGB downloads with urllib, which takes proxies from the environment: a
# proxy that nothing listens on keeps the tests off the network.
ENV = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
for _key in ('no_proxy', 'NO_PROXY'):
    ENV.pop(_key, None)
ENV.update(dict.fromkeys(('http_proxy', 'https_proxy'), dead_url('')))


def _run(*argv):
    proc = subprocess.run(
        [sys.executable, SCRIPT, *argv],
        stdin=subprocess.DEVNULL,  # nothing answers a prompt, as in CI
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
    )
    return proc


def _epochs(stdout):
    r"""The (loss, train, val, test) of every epoch the script printed."""
    rows = re.findall(
        r'Loss: ([\d.]+), Train: ([\d.]+), Val: ([\d.]+), Test: ([\d.]+)',
        stdout,
    )
    return [tuple(map(float, row)) for row in rows]


LOADERS = {
    'full': [],
    'neighbor': ['--loader', 'neighbor', '--batch-size', '16',
                 '--num-neighbors', '5', '-1'],
}  # fmt: skip


@pytest.fixture(scope='module')
def runs(tmp_path_factory) -> dict:
    r"""The script's runs of the tests below, in one process forked from a
    warm interpreter (each as ``python examples/ogbn.py`` runs it): a
    missing --root, and per loader a run on the graph and one on the same
    graph with the validation and test labels changed."""
    tmp = tmp_path_factory.mktemp('ogbn')
    write_fake_arxiv(str(tmp / 'a'))
    write_fake_arxiv(str(tmp / 'b'), relabel=0)
    # No validation node can be predicted right (label -1): 0.0 every epoch.
    x, y, edge_index, splits = _graph(120, 3, 0)
    y[splits[1]] = -1
    write_arxiv(str(tmp / 'val0'), x, y, edge_index, splits)
    invocations = {
        'missing': ['--root', str(tmp / 'missing')],
        'val0': ['--root', str(tmp / 'val0'), *SMALL[:-1], '3'],
    }
    loaders = ['full']
    if WITH_PYG_LIB or WITH_TORCH_SPARSE:
        loaders.append('neighbor')
    for loader in loaders:
        for graph in ('a', 'b'):
            invocations[loader, graph] = [
                '--root', str(tmp / f'{loader}-{graph}'), *SMALL,
                *LOADERS[loader],
            ]  # fmt: skip
            shutil.copytree(tmp / graph, tmp / f'{loader}-{graph}')
    results = run_in_one_interpreter(
        [script(SCRIPT, *argv) for argv in invocations.values()], env=ENV
    )
    return {'tmp': tmp, **dict(zip(invocations, results))}


def _check_training(runs, loader):
    proc = runs[loader, 'a']
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert '120 nodes' in proc.stdout and 'Downloading' not in proc.stderr
    rows = _epochs(proc.stdout)
    assert len(rows) == 20
    assert rows[-1][0] < 0.7 * rows[0][0]  # the loss falls
    # 3 well separated classes (chance 1/3):
    assert rows[-1][1] > 0.8 and max(r[2] for r in rows) > 0.6
    # The reported test accuracy is the one at the best validation epoch:
    best = max(rows, key=lambda r: r[2])  # the first of equal maxima
    assert f'validation accuracy: {best[3]:.4f}' in proc.stdout

    # Validation and test labels never enter training: the same graph with
    # all of them changed trains identically (same losses, same train acc).
    other = runs[loader, 'b']
    assert other.returncode == 0, other.stderr[-3000:]
    assert [r[:2] for r in _epochs(other.stdout)] == [r[:2] for r in rows]
    assert [r[2:] for r in _epochs(other.stdout)] != [r[2:] for r in rows]


@pytest.mark.slow
def test_full_batch(runs):
    _check_training(runs, 'full')


@pytest.mark.slow
@needs_sampler
def test_neighbor_loader(runs):
    _check_training(runs, 'neighbor')


@pytest.mark.slow
def test_test_accuracy_of_an_epoch_when_validation_stays_at_zero(runs):
    # The best validation accuracy started at 0.0 and only a higher one
    # replaced it: with 0.0 every epoch the script printed its initial
    # 0.0000, a test accuracy of no epoch, not the first epoch's.
    proc = runs['val0']
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _epochs(proc.stdout)
    assert len(rows) == 3 and all(r[2] == 0.0 for r in rows)
    assert rows[0][3] > 0.0  # so that the initial value would differ
    assert proc.stdout.strip().endswith(
        f'Test accuracy at the best validation accuracy: {rows[0][3]:.4f}'
    )


@pytest.mark.slow
def test_usage_errors(runs):
    proc = runs['missing']  # no network (a dead proxy): a clear error
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(
        'ogbn.py: error: argument --root: could not download ogbn-arxiv '
        '(URLError: <urlopen error [Errno 111] Connection refused>)'
    ), last
    folder = osp.join(str(runs['tmp'] / 'missing'), 'ogbn_arxiv')
    assert (
        f"'{folder}/raw/', '{folder}/split/' and '{folder}/RELEASE_v1.txt'"
    ) in last
    assert not osp.exists(runs['tmp'] / 'missing')  # nothing created either


@pytest.mark.slow
def test_a_copy_without_the_release_marker_is_a_usage_error(tmp_path):
    # The offline message said to copy raw/ and split/; a folder with only
    # those made OGB ask whether to download the dataset anew, and without
    # a terminal the script ended in an EOFError traceback.
    write_fake_arxiv(str(tmp_path))
    folder = tmp_path / 'ogbn_arxiv'
    (folder / 'RELEASE_v1.txt').unlink()
    proc = _run('--root', str(tmp_path))
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert 'Traceback' not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"ogbn.py: error: argument --root: '{folder}' holds no "
        "RELEASE_v1.txt, OGB's marker of the current version of ogbn-arxiv "
        '(an older download, or a copy without it), and OGB asked whether to '
        'download it anew: answer on a terminal, or add the marker to a '
        'current copy'
    )
    assert sorted(os.listdir(folder)) == ['raw', 'split']  # left as it was


@pytest.mark.slow
def test_a_processing_failure_is_not_called_a_download_failure(tmp_path):
    # With the raw files in place, an OSError of the processing (here its
    # folder blocked by a file; or a read-only --root) was reported as
    # "could not download", telling to copy the files that were there.
    write_fake_arxiv(str(tmp_path))
    folder = tmp_path / 'ogbn_arxiv'
    (folder / 'processed').write_text('')
    proc = _run('--root', str(tmp_path))
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"ogbn.py: error: argument --root: could not process '{folder}/raw/' "
        f"(FileExistsError: [Errno 17] File exists: '{folder}/processed'); "
        f"OGB writes the processed dataset into '{folder}/processed/': point "
        '--root at a writable copy'
    )
    assert (folder / 'raw' / 'edge.csv.gz').exists()  # the user's files


@pytest.mark.slow
@pytest.mark.skipif(
    WITH_PYG_LIB or WITH_TORCH_SPARSE, reason='a sampler is installed'
)
def test_neighbor_loader_without_a_sampler_is_a_usage_error(tmp_path):
    write_fake_arxiv(str(tmp_path))
    proc = _run('--root', str(tmp_path), '--loader', 'neighbor')
    assert proc.returncode == 2
    assert 'the sampling needs pyg-lib or torch-sparse' in proc.stderr


@pytest.mark.parametrize(
    'argv, expected',
    [
        # GATEConv takes a dropout in [0, 1): 1 passed, then failed after
        # the dataset was loaded (or downloaded).
        (
            ['--dropout', '1'],
            "argument --dropout: expected a number in [0.0, 1.0), got '1'",
        ),
        (
            ['--hidden-channels', '7', '--heads', '2'],
            'argument --hidden-channels: expected a multiple of --heads (2), '
            'got 7',
        ),
        (
            ['--lr', 'inf'],
            "argument --lr: expected a finite number in (0.0, inf), got 'inf'",
        ),
        (
            ['--seed', str(2**64)],
            f'argument --seed: expected an integer >= 0 and < {2**64}, got '
            f"'{2**64}'",
        ),
    ],
)
def test_bad_arguments_fail_before_the_dataset(tmp_path, argv, expected):
    root = tmp_path / 'OGB'  # missing: a download would be tried
    proc = _run('--root', str(root), *argv)
    assert proc.returncode == 2
    assert (
        proc.stderr.strip().splitlines()[-1] == f'ogbn.py: error: {expected}'
    )
    assert not root.exists()
