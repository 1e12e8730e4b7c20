import os
import os.path as osp
import random

import numpy as np
import pytest
import torch
from torch_geometric.testing import withPackage
from torch_geometric.utils import (
    contains_self_loops,
    is_undirected,
    one_hot,
    scatter,
)

from torch_geometric_gate.datasets import SelfSufficientER


def check_structure(data, num_nodes, edge_prob):
    edge_index = data.edge_index
    assert is_undirected(edge_index, num_nodes=num_nodes)
    assert not contains_self_loops(edge_index)
    # No duplicate edges:
    key = edge_index[0] * num_nodes + edge_index[1]
    assert key.unique().numel() == key.numel()
    # Edge density: the number of undirected edges is Binomial(n, p) with
    # n = N (N - 1) / 2; allow five standard deviations.
    n = num_nodes * (num_nodes - 1) // 2
    mean, std = n * edge_prob, (n * edge_prob * (1 - edge_prob)) ** 0.5
    assert abs(edge_index.size(1) // 2 - mean) < 5 * std

    masks = torch.stack([data.train_mask, data.val_mask, data.test_mask])
    assert masks.dtype == torch.bool
    assert torch.equal(masks.sum(dim=0), torch.ones(num_nodes).long())


def test_self_sufficient_er_structure(tmp_path):
    dataset = SelfSufficientER(str(tmp_path), num_classes=4)
    assert len(dataset) == 1
    assert str(dataset) == (
        'SelfSufficientER(num_nodes=1000, edge_prob=0.01, num_classes=4)'
    )
    assert dataset.num_classes == 4 and dataset.num_features == 4
    data = dataset[0]
    assert data.num_nodes == 1000
    check_structure(data, 1000, 0.01)
    assert [
        int(m.sum()) for m in (data.train_mask, data.val_mask, data.test_mask)
    ] == [500, 250, 250]

    assert data.y.dtype == torch.long
    assert torch.equal(data.x, one_hot(data.y, 4))
    # Uniform labels: each class count is Binomial(1000, 1/4), std 13.7.
    counts = data.y.bincount(minlength=4)
    assert ((counts - 250).abs() < 5 * 13.7).all()


def test_self_sufficient_er_other_arguments(tmp_path):
    data = SelfSufficientER(
        str(tmp_path),
        num_nodes=300,
        edge_prob=0.05,
        num_classes=3,
        split=(0.6, 0.3, 0.1),
        seed=7,
    )[0]
    check_structure(data, 300, 0.05)
    assert [
        int(m.sum()) for m in (data.train_mask, data.val_mask, data.test_mask)
    ] == [180, 90, 30]
    assert data.x.size() == (300, 3)

    empty = SelfSufficientER(str(tmp_path), num_nodes=10, edge_prob=0.0)[0]
    assert empty.edge_index.size() == (2, 0)
    full = SelfSufficientER(str(tmp_path), num_nodes=10, edge_prob=1.0)[0]
    assert full.edge_index.size(1) == 10 * 9


def test_self_sufficient_er_determinism(tmp_path):
    state = torch.get_rng_state()
    np_state = np.random.get_state()
    py_state = random.getstate()

    a = SelfSufficientER(str(tmp_path / 'a'), seed=3)
    b = SelfSufficientER(str(tmp_path / 'b'), seed=3)
    with (
        open(a.processed_paths[0], 'rb') as f,
        open(b.processed_paths[0], 'rb') as g,
    ):
        assert f.read() == g.read()  # Same arguments, same bytes.
    for key in ('x', 'edge_index', 'y', 'train_mask', 'val_mask', 'test_mask'):
        assert torch.equal(a[0][key], b[0][key])

    c = SelfSufficientER(str(tmp_path / 'a'), seed=4)[0]
    assert c.edge_index.size() != a[0].edge_index.size() or not torch.equal(
        c.edge_index, a[0].edge_index
    )
    assert not torch.equal(c.y, a[0].y)
    assert not torch.equal(c.train_mask, a[0].train_mask)

    # The caller's random state is untouched:
    assert torch.equal(torch.get_rng_state(), state)
    new_np_state = np.random.get_state()
    assert all(
        np.array_equal(x, y)
        for x, y in zip(np_state, new_np_state, strict=True)
    )
    assert random.getstate() == py_state


def test_self_sufficient_er_file_name(tmp_path):
    base = dict(
        num_nodes=100,
        edge_prob=0.05,
        num_classes=2,
        split=(0.5, 0.25, 0.25),
        seed=0,
    )
    changes = dict(
        num_nodes=101,
        edge_prob=0.051,
        num_classes=3,
        split=(0.5, 0.3, 0.2),
        seed=1,
    )
    names = {SelfSufficientER(str(tmp_path), **base).processed_file_names}
    for key, value in changes.items():
        dataset = SelfSufficientER(str(tmp_path), **{**base, key: value})
        names.add(dataset.processed_file_names)
        assert osp.exists(dataset.processed_paths[0])
    assert len(names) == 1 + len(changes)  # Every argument is encoded.
    # The data of a changed argument is not a stale copy:
    data = SelfSufficientER(str(tmp_path), **{**base, 'num_nodes': 101})[0]
    assert data.num_nodes == 101


def test_self_sufficient_er_pre_transform(tmp_path):
    def pre_transform(data):
        data.x = 2 * data.x
        return data

    data = SelfSufficientER(
        str(tmp_path), num_nodes=50, edge_prob=0.1, pre_transform=pre_transform
    )[0]
    assert torch.equal(data.x, 2 * one_hot(data.y, 2))


@pytest.mark.parametrize(
    'kwargs, match',
    [
        (dict(num_nodes=2, num_classes=3), 'at least'),
        (dict(num_nodes=0), 'num_nodes'),
        (dict(num_classes=1), 'num_classes'),
        (dict(edge_prob=-0.1), r'\[0, 1\]'),
        (dict(edge_prob=1.5), r'\[0, 1\]'),
        (dict(edge_prob=float('nan')), r'\[0, 1\]'),
        (dict(split=(0.5, 0.25)), 'three numbers'),
        (dict(split=(0.5, 0.25, 0.3)), 'sum to 1'),
        (dict(split=(1.25, -0.25, 0.0)), 'negative'),
        (dict(split='abc'), 'three numbers'),
        # NaN was called negative, infinity was reported as a wrong sum:
        (dict(split=(float('nan'), 0.5, 0.5)), 'finite.*NaN'),
        (dict(split=(float('inf'), 0.0, 0.0)), 'finite.*infinite'),
        (dict(seed=-1), 'seed'),
        # Raised OSError 'File name too long' after creating 'root':
        (dict(num_nodes=10, seed=10**240), r"'seed' must be below 2\*\*64"),
        (dict(num_nodes=10, seed=2**64), r"'seed' must be below 2\*\*64"),
    ],
)
def test_self_sufficient_er_value_errors(tmp_path, kwargs, match):
    root = tmp_path / 'root'
    with pytest.raises(ValueError, match=match):
        SelfSufficientER(str(root), **kwargs)
    assert not os.path.exists(root)  # Nothing written.


def test_self_sufficient_er_type_errors(tmp_path):
    root = tmp_path / 'root'
    for kwargs in (
        dict(num_nodes=10.0),
        dict(num_classes=True),
        dict(seed='0'),
    ):
        with pytest.raises(TypeError, match='must be an int'):
            SelfSufficientER(str(root), **kwargs)
    assert not os.path.exists(root)


@withPackage('sklearn')
def test_self_sufficient_er_task(tmp_path):
    # The label is in the node's own features and nowhere else: a logistic
    # regression on the own features is perfect, one on the mean of the
    # neighbors' features is at chance level.
    from sklearn.linear_model import LogisticRegression

    def accuracy(features, data):
        clf = LogisticRegression(max_iter=1000)
        clf.fit(features[data.train_mask], data.y[data.train_mask])
        return clf.score(features[data.test_mask], data.y[data.test_mask])

    # Measured test accuracies (seeds 0, 1, 2): own features 1.000 1.000
    # 1.000 for C = 2 and C = 4; mean of neighbors 0.524 0.480 0.512 for
    # C = 2 (chance 0.5) and 0.264 0.248 0.244 for C = 4 (chance 0.25),
    # at most 0.024 from chance; we allow 0.08.
    for num_classes in (2, 4):
        for seed in range(3):
            data = SelfSufficientER(
                str(tmp_path), num_classes=num_classes, seed=seed
            )[0]
            x = data.x.double()
            neighbors = scatter(
                x[data.edge_index[0]],
                data.edge_index[1],
                dim=0,
                dim_size=data.num_nodes,
                reduce='mean',
            )
            assert accuracy(x.numpy(), data) == 1.0
            chance = 1 / num_classes
            assert abs(accuracy(neighbors.numpy(), data) - chance) < 0.08


def test_self_sufficient_er_numpy_numbers(tmp_path):
    # numpy floats are numbers: np.float32 was rejected as "must be a
    # probability in [0, 1]".
    kwargs = dict(num_nodes=40, seed=3)
    ref = SelfSufficientER(
        str(tmp_path / 'a'), edge_prob=0.25, split=(0.5, 0.25, 0.25), **kwargs
    )[0]
    split = tuple(np.float32(s) for s in (0.5, 0.25, 0.25))
    data = SelfSufficientER(
        str(tmp_path / 'b'), edge_prob=np.float32(0.25), split=split, **kwargs
    )[0]
    for key in ('x', 'y', 'edge_index', 'train_mask', 'test_mask'):
        assert torch.equal(data[key], ref[key])
