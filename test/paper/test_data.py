import os
import os.path as osp

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
from torch_geometric.data import Data
from torch_geometric.datasets import Planetoid, WebKB
from torch_geometric.utils import (
    is_undirected,
)

from gate_paper.data import (
    check_masks,
    default_root,
    edges_of,
    fetch,
    load_dataset,
    load_npz,
    npz_graph,
    pyg_dataset,
    raw_files,
    split_masks,
)
from gate_paper.models import build_model


def tree(root):
    return sorted(
        osp.relpath(osp.join(d, n), root)
        for d, dirs, files in os.walk(root)
        for n in dirs + files
    )


@pytest.mark.parametrize('root', ['missing', 'empty', 'partial'])
def test_offline_names_the_files_and_leaves_nothing(
    tmp_path, monkeypatch, root
):
    # Without network (here: a server that is down) the download fails: the
    # error names the dataset, the files and how to point the root at a
    # copy, and the root is left as it was (issue 46).
    url = dead_url(WebKB.url)
    monkeypatch.setattr(WebKB, 'url', url)
    if root == 'empty':
        (tmp_path / 'empty').mkdir()
    elif root == 'partial':
        raw = tmp_path / 'partial' / 'WebKB' / 'texas' / 'raw'
        raw.mkdir(parents=True)
        (raw / 'out1_graph_edges.txt').write_text('node_id\tnode_id\n')
    before = tree(tmp_path)
    path = str(tmp_path / root)
    with pytest.raises(FileNotFoundError) as e:
        load_dataset('Texas', path)
    assert str(e.value) == (
        'could not download Texas (URLError: <urlopen error [Errno 111] '
        f'Connection refused>); expected its raw files under the data root '
        f'{path!r}: WebKB/texas/raw/out1_node_feature_label.txt, '
        'WebKB/texas/raw/out1_graph_edges.txt, '
        'WebKB/texas/raw/texas_split_0.6_0.2_0.npz and 9 more. Without '
        "network, copy them there from a local copy (the layout of PyG's "
        'dataset classes), or point the data root (--data-root, or the '
        'environment variable GATE_DATA_ROOT) at a folder that holds them'
    )
    assert tree(tmp_path) == before


def test_default_root(monkeypatch):
    monkeypatch.delenv('GATE_DATA_ROOT', raising=False)
    assert default_root() == 'data'
    monkeypatch.setenv('GATE_DATA_ROOT', '/somewhere/else')
    assert default_root() == '/somewhere/else'


CORA = ('Planetoid', 'Cora', 'raw')


@needs_shared(*CORA)
def test_cora_downloads_from_a_local_server(tmp_path, monkeypatch, capsys):
    # PyG's Planetoid fetches its files (through fsspec and aiohttp) from a
    # server on 127.0.0.1 that serves copies of the offline files at the
    # URL paths PyG would fetch.
    files = {
        local_url('', f'{Planetoid.url}/{osp.basename(f)}'): shared(
            *CORA, osp.basename(f)
        )
        for f in raw_files('Cora')
    }
    with serve(files, tmp_path / 'server') as base:
        monkeypatch.setattr(Planetoid, 'url', local_url(base, Planetoid.url))
        root = str(tmp_path / 'data')  # missing: made by the download
        data, num_classes = load_dataset('Cora', root)
        fetch(['Cora'], root)  # present: nothing to do
    assert (data.num_nodes, num_classes) == (2708, 7)
    assert tree(tmp_path / 'data') == [
        'Planetoid',
        'Planetoid/Cora',
        'Planetoid/Cora/processed',
        'Planetoid/Cora/processed/data.pt',
        'Planetoid/Cora/processed/pre_filter.pt',
        'Planetoid/Cora/processed/pre_transform.pt',
        'Planetoid/Cora/raw',
        *sorted(osp.join(*CORA, osp.basename(f)) for f in raw_files('Cora')),
    ]
    for f in raw_files('Cora'):
        with (
            open(osp.join(root, f), 'rb') as a,
            open(shared(*CORA, osp.basename(f)), 'rb') as b,
        ):
            assert a.read() == b.read()
    assert capsys.readouterr().err == ''  # no Downloading/Processing lines


def test_unknown_dataset():
    with pytest.raises(ValueError, match="unknown dataset 'Texa'"):
        raw_files('Texa')


@needs_shared('WebKB', 'texas')
@needs_shared(*CORA)
def test_offline_copy_loads_with_pyg(tmp_path):
    copy_shared('WebKB', tmp_path)
    copy_shared('Planetoid', tmp_path)
    data, num_classes = load_dataset('Texas', str(tmp_path))
    assert (data.num_nodes, num_classes) == (183, 5)
    assert data.train_mask.shape == (183, 10)
    train, val, test = split_masks(data, 3)
    assert not bool((train & test).any())
    # The runs' `edges` say what the graph is:
    assert edges_of('Texas') == 'undirected' and is_undirected(data.edge_index)
    data, _ = load_dataset('Cora', str(tmp_path))
    assert data.train_mask.shape == (2708, 1)
    assert torch.allclose(data.x.sum(-1)[data.x.sum(-1) > 0], torch.ones(1))
    assert edges_of('Cora') == 'undirected' and is_undirected(data.edge_index)


@needs_shared('WebKB', 'texas')
@needs_shared('WebKB', 'wisconsin')
@needs_shared('Actor')
def test_webkb_and_actor_graphs_are_table_6s(tmp_path):
    # The paper's Table 6 counts the undirected graphs of Platonov et al.'s
    # files, each edge once; PyG's are directed hyperlink graphs with
    # self-loops (the runs used those until they were made Table 6's).
    copy_shared('WebKB', tmp_path)
    copy_shared('Actor', tmp_path)
    for name, directed, loops, table6 in (
        ('Texas', 309, 16, 279),
        ('Wisconsin', 499, 16, 450),
        ('Actor', 29926, 93, 26659),
    ):
        pyg = pyg_dataset(name, str(tmp_path))[0].edge_index
        assert (pyg[0] == pyg[1]).sum() == loops and pyg.size(1) == (
            directed + loops
        )
        data, _ = load_dataset(name, str(tmp_path))
        assert edges_of(name) == 'undirected'
        assert is_undirected(data.edge_index)
        assert not bool((data.edge_index[0] == data.edge_index[1]).any())
        assert data.edge_index.size(1) == 2 * table6
        # Every hyperlink is kept, in both directions, and nothing else:
        links = {(u, v) for u, v in pyg.t().tolist() if u != v}
        both = links | {(v, u) for u, v in links}
        assert set(map(tuple, data.edge_index.t().tolist())) == both


@needs_shared('WebKB', 'texas')
@needs_shared('Actor')
@needs_shared('heterophilous', 'minesweeper')
def test_pyg_dataset_applies_the_transform_to_every_class(tmp_path):
    # The transform reached Planetoid only; WebKB, Actor and the
    # heterophilous sets dropped it silently.
    for part in ('WebKB', 'Actor', 'heterophilous'):
        copy_shared(part, tmp_path)

    def mark(data):
        data.marked = torch.ones(1)
        return data

    for name in ('Texas', 'Actor', 'Minesweeper'):
        data = pyg_dataset(name, str(tmp_path), mark)[0]
        assert torch.equal(data.marked, torch.ones(1)), name
        # load_dataset normalises Planetoid features only:
        plain = pyg_dataset(name, str(tmp_path))[0]
        assert torch.equal(load_dataset(name, str(tmp_path))[0].x, plain.x)


def test_split_masks_are_checked():
    mask = torch.zeros(6, 2, dtype=torch.bool)
    data = Data(
        y=torch.tensor([0, 1, 0, 1, 0, 0]),
        train_mask=mask.clone(),
        val_mask=mask.clone(),
        test_mask=mask.clone(),
    )
    data.train_mask[0:2] = True
    data.val_mask[2:4] = True
    data.test_mask[4:6] = True
    with pytest.raises(ValueError, match='split 2 does not exist'):
        split_masks(data, 2)
    with pytest.raises(ValueError, match='test nodes hold only class 0'):
        split_masks(data, 0, both_classes=True)
    data.test_mask[1, 1] = True
    with pytest.raises(ValueError, match='1 nodes are in both the training'):
        split_masks(data, 1)


def write_graph(path, overlap=False, **arrays):
    n = 10
    train = np.arange(n) < 5
    val = (np.arange(n) >= 5) & (np.arange(n) < 7)
    test = np.arange(n) >= 7
    if overlap:
        test[0] = True
    graph = dict(
        x=np.random.rand(n, 2).astype(np.float32),
        edge_index=np.array([[0, 1], [1, 2]]),
        y=np.arange(n) % 2,
        train_mask=train,
        val_mask=val,
        test_mask=test,
    )
    np.savez(path, **{**graph, **arrays})


def test_npz_graph(tmp_path):
    write_graph(tmp_path / 'g.npz')
    data = npz_graph(str(tmp_path / 'g.npz'))
    assert data.x.shape == (10, 2) and int(data.test_mask.sum()) == 3


def test_npz_graph_gives_the_models_dtypes(tmp_path):
    # A float64 x passed the checks, then the first run crashed on it
    # (float32 weights): x becomes float32, indices int64, masks bool.
    n = np.arange(10)
    path = str(tmp_path / 'g.npz')
    write_graph(
        path,
        x=np.random.rand(10, 2),
        edge_index=np.array([[0, 1], [1, 2]], dtype=np.int32),
        y=(n % 2).astype(np.uint8),
        train_mask=(n < 5).astype(np.int8),
    )
    data = npz_graph(path)
    assert data.x.dtype == torch.float32
    assert data.edge_index.dtype == data.y.dtype == torch.long
    assert data.train_mask.dtype == torch.bool
    assert int(data.train_mask.sum()) == 5
    model = build_model('synthetic', 'GATE', 2, 8, 2, 1)
    out, _ = model.forward_with_self_attention(data.x, data.edge_index)
    assert out.shape == (10, 2)


@pytest.mark.parametrize(
    'key, array, kind',
    [
        ('y', (np.arange(10) % 2).astype(np.float64), 'integers'),
        ('edge_index', np.array([[0.0, 1.0], [1.0, 2.0]]), 'integers'),
        ('x', np.array([['a', 'b']] * 10), 'numbers'),
        ('val_mask', np.full(10, 0.5), 'booleans or 0/1 integers'),
    ],
)
def test_npz_graph_of_another_dtype_names_the_array(
    tmp_path, key, array, kind
):
    path = str(tmp_path / 'g.npz')
    write_graph(path, **{key: array})
    with pytest.raises(ValueError) as e:
        npz_graph(path)
    assert str(e.value).startswith(
        f'{path!r}: the array {key!r} must hold {kind} (it becomes '
    )
    assert str(e.value).endswith(f'got {array.dtype}')


def test_npz_graph_with_overlapping_masks_is_refused(tmp_path):
    # --paper-data trained and tested on the same nodes of an npz whose
    # masks overlap (issue 35, item 14).
    path = str(tmp_path / 'g.npz')
    write_graph(path, overlap=True)
    with pytest.raises(ValueError) as e:
        npz_graph(path)
    assert path in str(e.value)
    assert '1 nodes are in both the training and test masks' in str(e.value)


@pytest.mark.parametrize('kind', ['garbage', 'truncated', 'pickled', 'keys'])
def test_unreadable_npz_names_the_file(tmp_path, kind):
    # A corrupted npz gave numpy's "allow_pickle" message (item 19).
    path = tmp_path / 'g.npz'
    if kind == 'garbage':
        path.write_bytes(b'\x00not a zip file at all' * 10)
    elif kind == 'truncated':
        write_graph(path)
        path.write_bytes(path.read_bytes()[:300])
    elif kind == 'pickled':
        np.savez(path, x=np.array([{'a': 1}], dtype=object))
    else:
        np.savez(path, x=np.zeros(3))
    with pytest.raises(ValueError) as e:
        load_npz(str(path), ['x', 'y'])
    assert str(path) in str(e.value)
    assert ('not a readable .npz file' in str(e.value)) or (
        "lacks the arrays ['y']" in str(e.value)
    )
    with pytest.raises(FileNotFoundError, match='no such .npz file'):
        load_npz(str(tmp_path / 'none.npz'), ['x'])


def test_check_masks_empty():
    full = torch.ones(4, dtype=torch.bool)
    with pytest.raises(ValueError, match='has an empty mask'):
        check_masks(full, ~full, ~full, 'the graph')
