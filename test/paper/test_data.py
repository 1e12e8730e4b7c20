import os
import os.path as osp

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from gate_paper.data import (
    SHARED_DATA,
    check_masks,
    copy_offline,
    load_dataset,
    load_npz,
    npz_graph,
    raw_files,
    split_masks,
)

needs_shared = pytest.mark.skipif(
    not osp.isdir(SHARED_DATA), reason='needs ../shared/data'
)


def tree(root):
    return sorted(
        osp.relpath(osp.join(d, n), root)
        for d, dirs, files in os.walk(root)
        for n in dirs + files
    )


@pytest.mark.parametrize('root', ['missing', 'empty', 'misspelled'])
def test_missing_dataset_names_the_layout_and_creates_nothing(tmp_path, root):
    # A missing or misspelled data root ended in urllib's URLError after
    # creating empty folders (issue 35, item 16).
    if root == 'empty':
        (tmp_path / 'empty').mkdir()
    elif root == 'misspelled':
        (tmp_path / 'misspelled' / 'WebKB' / 'Texas' / 'raw').mkdir(
            parents=True
        )
    before = tree(tmp_path)
    path = str(tmp_path / root)
    with pytest.raises(FileNotFoundError) as e:
        load_dataset('Texas', path)
    message = str(e.value)
    assert message.startswith(f'no offline copy of Texas under {path!r}')
    assert 'expected the layout of ../shared/data' in message
    assert 'WebKB/texas/raw/out1_node_feature_label.txt' in message
    assert tree(tmp_path) == before


def test_unknown_dataset():
    with pytest.raises(ValueError, match="unknown dataset 'Texa'"):
        raw_files('Texa')


@needs_shared
def test_offline_copy_loads_with_pyg(tmp_path):
    copy_offline(['Texas', 'Cora'], SHARED_DATA, str(tmp_path))
    data, num_classes = load_dataset('Texas', str(tmp_path))
    assert (data.num_nodes, num_classes) == (183, 5)
    assert data.train_mask.shape == (183, 10)
    train, val, test = split_masks(data, 3)
    assert not bool((train & test).any())
    data, _ = load_dataset('Cora', str(tmp_path))
    assert data.train_mask.shape == (2708, 1)
    assert torch.allclose(data.x.sum(-1)[data.x.sum(-1) > 0], torch.ones(1))


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


def write_graph(path, overlap=False):
    n = 10
    train = np.arange(n) < 5
    val = (np.arange(n) >= 5) & (np.arange(n) < 7)
    test = np.arange(n) >= 7
    if overlap:
        test[0] = True
    np.savez(
        path,
        x=np.random.rand(n, 2).astype(np.float32),
        edge_index=np.array([[0, 1], [1, 2]]),
        y=np.arange(n) % 2,
        train_mask=train,
        val_mask=val,
        test_mask=test,
    )


def test_npz_graph(tmp_path):
    write_graph(tmp_path / 'g.npz')
    data = npz_graph(str(tmp_path / 'g.npz'))
    assert data.x.shape == (10, 2) and int(data.test_mask.sum()) == 3


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
