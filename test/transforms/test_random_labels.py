import os
import os.path as osp
import random
import shutil

import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.transforms import Compose

from torch_geometric_gate.transforms import OneHotLabelFeatures, RandomLabels

DATA = os.environ.get(
    'GATE_SHARED_DATA',
    osp.join(osp.dirname(__file__), '..', '..', '..', 'shared', 'data'),
)


def test_random_labels():
    data = Data(x=torch.randn(7000, 3), y=torch.zeros(7000, dtype=torch.long))
    state = torch.get_rng_state()
    np_state = np.random.get_state()
    py_state = random.getstate()

    out = RandomLabels(7, seed=1)(data)
    assert out.y.dtype == torch.long and out.y.size() == (7000,)
    # Uniform: each count ~ Binomial(7000, 1/7), std 29.3.
    counts = out.y.bincount(minlength=7)
    assert ((counts - 1000).abs() < 5 * 29.3).all()

    assert torch.equal(RandomLabels(7, seed=1)(data).y, out.y)
    assert not torch.equal(RandomLabels(7, seed=2)(data).y, out.y)
    assert torch.equal(data.y, torch.zeros(7000, dtype=torch.long))
    assert out.x is data.x

    assert torch.equal(torch.get_rng_state(), state)
    new_np_state = np.random.get_state()
    assert all(
        np.array_equal(x, y)
        for x, y in zip(np_state, new_np_state, strict=True)
    )
    assert random.getstate() == py_state

    assert str(RandomLabels(7, seed=1)) == 'RandomLabels(7, seed=1)'


def test_random_labels_device():
    # The labels were always on the CPU: after T.ToDevice('cuda'), labels
    # and features were on different devices. They follow 'data.x', else
    # 'data.edge_index', else any tensor of the graph.
    transform = RandomLabels(5, seed=3)
    x = torch.empty(12, 2, device='meta')
    edge_index = torch.empty(2, 0, dtype=torch.long, device='meta')
    for data in (
        Data(x=x, edge_index=torch.empty(2, 0, dtype=torch.long)),
        Data(edge_index=edge_index, num_nodes=12),
        Data(pos=x, num_nodes=12),
    ):
        y = transform(data).y
        assert y.device.type == 'meta' and y.shape == (12,)
    # On the CPU, the labels of before, bit for bit:
    y = transform(Data(num_nodes=12)).y
    assert y.device.type == 'cpu' and y.dtype == torch.long
    assert y.tolist() == [1, 3, 2, 2, 0, 0, 0, 0, 1, 4, 4, 1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')
def test_random_labels_cuda():
    data = Data(x=torch.randn(12, 2, device='cuda'))
    y = RandomLabels(5, seed=3)(data).y
    assert y.is_cuda
    assert y.tolist() == [1, 3, 2, 2, 0, 0, 0, 0, 1, 4, 4, 1]


def test_numpy_integers():
    # NumPy integers were refused ("'num_classes' must be an int"), while
    # NumPy floats were taken; they are stored as Python ints.
    data = Data(num_nodes=20)
    transform = RandomLabels(np.int64(3), seed=np.uint64(1))
    assert type(transform.num_classes) is int and type(transform.seed) is int
    assert repr(transform) == repr(RandomLabels(3, seed=1))
    assert torch.equal(transform(data).y, RandomLabels(3, seed=1)(data).y)
    transform = OneHotLabelFeatures(np.int32(3))
    assert type(transform.num_classes) is int
    assert repr(transform) == repr(OneHotLabelFeatures(3))
    for value in (True, np.bool_(True), torch.tensor(True), 3.0, '3'):
        with pytest.raises(TypeError, match="'num_classes' must be an int"):
            RandomLabels(value)
        with pytest.raises(
            TypeError, match="'num_classes' must be an int or None"
        ):
            OneHotLabelFeatures(value)
    with pytest.raises(ValueError, match="'seed' must be at least 0"):
        RandomLabels(2, seed=np.int64(-1))


@pytest.mark.filterwarnings('ignore:Unable to accurately infer')
def test_random_labels_errors():
    with pytest.raises(ValueError, match='num_classes'):
        RandomLabels(0)
    with pytest.raises(ValueError, match='seed'):
        RandomLabels(2, seed=-1)
    # Failed at the first call, in torch.Generator.manual_seed ('Overflow
    # when unpacking long long'):
    with pytest.raises(ValueError, match=r"'seed' must be below 2\*\*64"):
        RandomLabels(2, seed=2**64)
    assert RandomLabels(2, seed=2**64 - 1)(Data(num_nodes=3)).y.numel() == 3
    with pytest.raises(TypeError, match='num_classes'):
        RandomLabels(2.0)
    with pytest.raises(ValueError, match='number of nodes'):
        RandomLabels(2)(Data())


def test_cora_self_sufficient_variants(tmp_path):
    # Table 1's Cora variants: Cora's graph and standard split, features the
    # one-hot encoding of Cora's own labels or of random labels.
    from torch_geometric.datasets import Planetoid

    src = osp.join(DATA, 'Planetoid', 'Cora')
    if not osp.isdir(src):
        pytest.skip(f"Cora is not available at '{src}'")
    shutil.copytree(src, tmp_path / 'Cora')
    cora = Planetoid(str(tmp_path), 'Cora')[0]

    original = Planetoid(
        str(tmp_path), 'Cora', transform=OneHotLabelFeatures(7)
    )[0]
    assert torch.equal(original.x, torch.eye(7)[cora.y])
    assert torch.equal(original.y, cora.y)

    transform = Compose([RandomLabels(7, seed=0), OneHotLabelFeatures(7)])
    dataset = Planetoid(str(tmp_path), 'Cora', transform=transform)
    rand = dataset[0]
    assert torch.equal(rand.x, torch.eye(7)[rand.y])
    assert torch.equal(dataset[0].y, rand.y)  # The same at every access.
    # Random labels agree with Cora's at chance level (1/7 = 0.143):
    assert abs(float((rand.y == cora.y).float().mean()) - 1 / 7) < 0.03
    for key in ('edge_index', 'train_mask', 'val_mask', 'test_mask'):
        assert torch.equal(rand[key], cora[key])
    assert [
        int(rand[f'{m}_mask'].sum()) for m in ('train', 'val', 'test')
    ] == [140, 500, 1000]
