import copy
import os
import os.path as osp
import random
import shutil

import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.nn import GATv2Conv
from torch_geometric.testing import withPackage
from torch_geometric.utils import erdos_renyi_graph, to_dense_adj

from torch_geometric_gate.transforms import RandomGATLabels

DATA = os.environ.get(
    'GATE_SHARED_DATA',
    osp.join(osp.dirname(__file__), '..', '..', '..', 'shared', 'data'),
)


def random_graph(num_nodes=60, num_features=3, edge_prob=0.1, seed=12345):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, num_features, generator=gen)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        edge_index = erdos_renyi_graph(num_nodes, edge_prob)
    return Data(x=x, edge_index=edge_index)


def dense_network(transform, x, edge_index):
    # Independent dense computation of the random GAT: a masked softmax over
    # the rows of the adjacency matrix A[v, u] = 1 for an edge u -> v.
    n = x.size(0)
    adj = to_dense_adj(edge_index, max_num_nodes=n)[0].t().bool()
    adj.fill_diagonal_(False)
    act = {
        'relu': torch.relu,
        'elu': torch.nn.functional.elu,
        'tanh': torch.tanh,
        'identity': lambda h: h,
    }[transform.act]
    h = x.double()
    params = transform.network_parameters(x.size(1))
    for i, (w_src, w_dst, att) in enumerate(params):
        hs, ht = h @ w_src.t(), h @ w_dst.t()
        # score[v, u] = a . LeakyReLU(W_s h_u + W_t h_v)
        z = ht.unsqueeze(1) + hs.unsqueeze(0)
        score = torch.nn.functional.leaky_relu(z, transform.negative_slope)
        score = (score @ att).masked_fill(~adj, float('-inf'))
        alpha = torch.softmax(score, dim=1).nan_to_num(0.0)  # Isolated: 0.
        h = alpha @ hs
        if i < len(params) - 1:
            h = act(h)
    return h


@pytest.mark.parametrize('act', ['relu', 'elu', 'tanh', 'identity'])
@pytest.mark.parametrize('negative_slope', [0.0, 0.2])
def test_random_gat_labels_network_matches_dense(act, negative_slope):
    data = random_graph()
    t = RandomGATLabels(
        num_layers=3, seed=4, act=act, negative_slope=negative_slope
    )
    out = t.embed(data.x, data.edge_index)
    assert out.dtype == torch.float64 and out.size() == (60, 3)
    assert torch.allclose(out, dense_network(t, data.x, data.edge_index))


def test_random_gat_labels_network_matches_gatv2conv():
    # One layer is PyG's GATv2Conv without self-loops and bias, whose
    # lin_l/lin_r/att take the values W_s, W_t and a.
    data = random_graph(num_features=4)
    t = RandomGATLabels(num_layers=1, seed=2, negative_slope=0.2)
    ((w_src, w_dst, att),) = t.network_parameters(4)
    conv = GATv2Conv(
        4, 4, add_self_loops=False, bias=False, negative_slope=0.2
    ).double()
    with torch.no_grad():
        conv.lin_l.weight.copy_(w_src)
        conv.lin_r.weight.copy_(w_dst)
        conv.att.copy_(att.view(1, 1, 4))
    expected = conv(data.x.double(), data.edge_index)
    assert torch.allclose(t.embed(data.x, data.edge_index), expected)


def test_random_gat_labels_without_self_loops():
    data = random_graph()
    t = RandomGATLabels(num_layers=2)
    loops = torch.arange(60).repeat(2, 1)
    with_loops = torch.cat([data.edge_index, loops], dim=1)
    assert torch.equal(
        t.embed(data.x, with_loops), t.embed(data.x, data.edge_index)
    )

    # One layer and no self-loops: a node's own features enter only through
    # the attention scores, so an isolated neighbor-free node gets 0 and a
    # node with one neighbor gets exactly W_s x_u of that neighbor.
    x = torch.randn(3, 2)
    edge_index = torch.tensor([[1], [0]])  # 1 -> 0, node 2 isolated.
    t = RandomGATLabels(num_layers=1)
    ((w_src, _, _),) = t.network_parameters(2)
    out = t.embed(x, edge_index)
    assert torch.allclose(out[0], w_src @ x[1].double())
    assert torch.equal(out[1:], torch.zeros(2, 2, dtype=torch.float64))


def test_random_gat_labels_activation_between_layers_only():
    data = random_graph()
    relu = RandomGATLabels(num_layers=1, act='relu')
    ident = RandomGATLabels(num_layers=1, act='identity')
    assert torch.equal(
        relu.embed(data.x, data.edge_index),
        ident.embed(data.x, data.edge_index),
    )
    relu = RandomGATLabels(num_layers=2, act='relu')
    ident = RandomGATLabels(num_layers=2, act='identity')
    assert not torch.allclose(
        relu.embed(data.x, data.edge_index),
        ident.embed(data.x, data.edge_index),
    )


@pytest.mark.parametrize(
    'init', ['xavier_uniform', 'xavier_normal', 'torch_default']
)
def test_random_gat_labels_init(init):
    d = 300
    params = RandomGATLabels(num_layers=2, init=init).network_parameters(d)
    assert len(params) == 2
    w_src, w_dst, att = params[0]
    assert w_src.size() == (d, d) and att.size() == (d,)
    assert not torch.equal(w_src, w_dst)
    assert not torch.equal(params[0][0], params[1][0])
    w = torch.cat([w_src.flatten(), w_dst.flatten()])
    if init == 'xavier_uniform':  # U(-b, b), b = sqrt(6 / (d + d))
        bound = (6 / (2 * d)) ** 0.5
        assert w.abs().max() <= bound
        assert abs(w.std() / (bound / 3**0.5) - 1) < 0.02
        assert att.abs().max() <= (6 / (d + 1)) ** 0.5
    elif init == 'xavier_normal':  # N(0, 2 / (d + d))
        assert abs(w.std() / (1 / d) ** 0.5 - 1) < 0.02
        assert w.abs().max() > 3 * (1 / d) ** 0.5  # Not bounded.
    else:  # nn.Linear's default: U(-1/sqrt(d), 1/sqrt(d))
        bound = 1 / d**0.5
        assert w.abs().max() <= bound
        assert abs(w.std() / (bound / 3**0.5) - 1) < 0.02
    if init != 'xavier_uniform':  # Attention vector: N(0, 2 / (d + 1)).
        assert abs(att.std() / (2 / (d + 1)) ** 0.5 - 1) < 0.15


@withPackage('sklearn')
def test_relu_collapses_width_two_networks_elu_does_not():
    # The docstring's reason for the ELU default, as it states it: k = 3 on
    # G(1000, 0.01), d = 2, seeds 0 to 29.
    from torch_geometric_gate.datasets import er_graph

    def rank_deficient(act):
        count = 0
        for seed in range(30):
            edge_index = er_graph(1000, 0.01, seed)
            gen = torch.Generator().manual_seed(seed)
            x = torch.randn(1000, 2, generator=gen)
            transform = RandomGATLabels(3, 2, seed=seed, act=act)
            h = transform.embed(x, edge_index).double()
            count += int(torch.linalg.matrix_rank(h)) < 2
        return count

    assert rank_deficient('relu') == 18
    assert rank_deficient('elu') == 0


def test_random_gat_labels_are_kmeans_clusters():
    from sklearn.cluster import KMeans

    data = random_graph(num_nodes=200, edge_prob=0.05)
    t = RandomGATLabels(num_layers=2, num_classes=3, seed=9, n_init=4)
    out = t(data)
    assert out.y.dtype == torch.long and out.y.size() == (200,)
    h = t.embed(data.x, data.edge_index).numpy()
    expected = KMeans(3, n_init=4, random_state=9).fit_predict(h)
    assert torch.equal(out.y, torch.from_numpy(expected).long())
    assert set(out.y.tolist()) == {0, 1, 2}


@withPackage('sklearn')
def test_random_gat_labels_determinism_and_copy():
    data = random_graph(num_nodes=200, edge_prob=0.05)
    data.y = torch.zeros(200, dtype=torch.long)
    data.extra = torch.arange(200)
    before = copy.deepcopy(data)

    state = torch.get_rng_state()
    np_state = np.random.get_state()
    py_state = random.getstate()

    out1 = RandomGATLabels(num_layers=2, seed=1)(data)
    out2 = RandomGATLabels(num_layers=2, seed=1)(data)
    out3 = RandomGATLabels(num_layers=2, seed=2)(data)
    assert torch.equal(out1.y, out2.y)
    assert not torch.equal(out1.y, out3.y)

    assert torch.equal(torch.get_rng_state(), state)
    new_np_state = np.random.get_state()
    assert all(
        np.array_equal(x, y)
        for x, y in zip(np_state, new_np_state, strict=True)
    )
    assert random.getstate() == py_state

    # The input is unchanged, the output differs from it in `y` only:
    assert data.keys() == before.keys()
    for key in before.keys():
        assert torch.equal(data[key], before[key])
    assert out1 is not data
    assert sorted(out1.keys()) == sorted(data.keys())
    for key in ('x', 'edge_index', 'extra'):
        assert out1[key] is data[key]
    assert not torch.equal(out1.y, data.y)


@withPackage('sklearn')
def test_random_gat_labels_errors():
    data = random_graph()
    with pytest.raises(ValueError, match='data.x'):
        RandomGATLabels()(Data(edge_index=data.edge_index, num_nodes=60))
    with pytest.raises(ValueError, match='data.edge_index'):
        RandomGATLabels()(Data(x=data.x))
    with pytest.raises(ValueError, match='fewer than'):
        RandomGATLabels(num_classes=3)(
            Data(x=data.x[:2], edge_index=torch.tensor([[0], [1]]))
        )
    with pytest.raises(ValueError, match='shape'):
        RandomGATLabels()(Data(x=torch.randn(60), edge_index=data.edge_index))
    with pytest.raises(ValueError, match='edge_index'):
        RandomGATLabels().embed(data.x, data.edge_index[0])
    # Without edges, every node has the same (zero) output: no clusters.
    with pytest.raises(ValueError, match='distinct clusters'):
        RandomGATLabels()(Data(x=data.x, edge_index=torch.empty(2, 0).long()))

    for kwargs, match in [
        (dict(num_layers=0), 'num_layers'),
        (dict(num_classes=1), 'num_classes'),
        (dict(seed=-1), 'seed'),
        (dict(n_init=0), 'n_init'),
        (dict(act='gelu'), 'act'),
        (dict(negative_slope=-0.1), 'negative_slope'),
        (dict(negative_slope=float('nan')), 'negative_slope'),
        (dict(init='orthogonal'), 'init'),
    ]:
        with pytest.raises(ValueError, match=match):
            RandomGATLabels(**kwargs)
    with pytest.raises(TypeError, match='num_layers'):
        RandomGATLabels(num_layers=1.0)
    with pytest.raises(TypeError, match='seed'):
        RandomGATLabels(seed=None)


@withPackage('sklearn')
def test_random_gat_labels_rejects_bad_edge_index():
    # A negative index used to wrap around to the last node, and a bool
    # index was read as a mask: labels of another graph, without an error.
    data = random_graph()
    transform = RandomGATLabels()
    bad = data.edge_index.clone()
    bad[0, 0] = -1
    with pytest.raises(ValueError, match=r'out of range.*\[0, 60\).*-1'):
        transform(Data(x=data.x, edge_index=bad))
    bad[0, 0] = 60
    with pytest.raises(ValueError, match=r'out of range.*\[0, 60\).*60'):
        transform(Data(x=data.x, edge_index=bad))
    for dtype in [torch.float, torch.bool]:
        with pytest.raises(TypeError, match='integer dtype'):
            transform.embed(data.x, data.edge_index.to(dtype))
    with pytest.raises(TypeError, match='torch.Tensor'):
        transform.embed(data.x, data.edge_index.tolist())
    # int32 indices are fine and give the same network output:
    assert torch.equal(
        transform.embed(data.x, data.edge_index.int()),
        transform.embed(data.x, data.edge_index),
    )


def test_random_gat_labels_numpy_negative_slope():
    # A numpy float is a number: np.float32 was rejected as not one.
    data = random_graph()
    transform = RandomGATLabels(negative_slope=np.float32(0.0))
    assert transform.negative_slope == 0.0
    assert torch.equal(
        transform.embed(data.x, data.edge_index),
        RandomGATLabels(negative_slope=0.0).embed(data.x, data.edge_index),
    )


def test_random_gat_labels_tensor_negative_slope():
    # A 0-d tensor of 0.0 was refused as "'negative_slope' must be a finite
    # non-negative number".
    transform = RandomGATLabels(negative_slope=torch.tensor(0.0))
    assert type(transform.negative_slope) is float
    assert repr(transform) == repr(RandomGATLabels(negative_slope=0.0))
    for value in (torch.tensor(True), torch.tensor([0.2]), torch.tensor(-1.0)):
        with pytest.raises(ValueError, match="'negative_slope' must be a"):
            RandomGATLabels(negative_slope=value)


def test_random_gat_labels_sparse_and_complex_features():
    # A sparse 'x' failed inside isfinite ("Could not run 'aten::ne.Scalar'
    # with arguments from the 'SparseCPU' backend"); a complex one lost its
    # imaginary part with only PyTorch's casting warning.
    data = random_graph()
    transform = RandomGATLabels(num_classes=2)
    sparse = Data(x=data.x.to_sparse(), edge_index=data.edge_index)
    assert torch.equal(
        transform.embed(sparse.x, sparse.edge_index),
        transform.embed(data.x, data.edge_index),
    )
    assert torch.equal(transform(sparse).y, transform(data).y)
    for dtype in (torch.complex64, torch.complex128):
        x = data.x.to(dtype) + 1j
        with pytest.raises(
            ValueError,
            match=rf"^Expected real node features 'x' \(got {dtype}\)$",
        ):
            transform(Data(x=x, edge_index=data.edge_index))


def small_graph():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(40, 3, generator=gen)
    return Data(x=x, edge_index=torch.randint(40, (2, 200), generator=gen))


# The labels of `small_graph` before the network ran on the CPU whatever
# the device of the graph:
SMALL_GRAPH_LABELS = [
    0, 0, 2, 0, 2, 0, 0, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 2, 0, 0,
    1, 0, 0, 1, 0, 1, 2, 2, 2, 0, 2, 1, 2, 2, 0, 0, 2, 2, 1, 2,
]  # fmt: skip


@withPackage('sklearn')
def test_random_gat_labels_on_the_cpu_are_unchanged():
    transform = RandomGATLabels(num_layers=2, num_classes=3, seed=4)
    y = transform(small_graph()).y
    assert y.device.type == 'cpu' and y.dtype == torch.long
    assert y.tolist() == SMALL_GRAPH_LABELS


@withPackage('sklearn')
@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')
def test_random_gat_labels_cuda():
    # The network's parameters stayed on the CPU (a CUDA 'x' failed in the
    # first product) and K-means read 'h.numpy()'. The network runs on the
    # CPU: the same output bit for bit, on the device of 'x'.
    transform = RandomGATLabels(num_layers=2, num_classes=3, seed=4)
    data = small_graph()
    h = transform.embed(data.x, data.edge_index)
    h_cuda = transform.embed(data.x.cuda(), data.edge_index.cuda())
    assert h_cuda.is_cuda and torch.equal(h_cuda.cpu(), h)
    y = transform(data.cuda()).y
    assert y.is_cuda and y.tolist() == SMALL_GRAPH_LABELS


def test_random_gat_labels_numpy_integers():
    # NumPy integers were refused ("'num_classes' must be an int").
    ints = dict(num_layers=2, num_classes=3, seed=1, n_init=2)
    transform = RandomGATLabels(
        **{key: np.int64(value) for key, value in ints.items()}
    )
    for key in ints:
        assert type(getattr(transform, key)) is int
    assert repr(transform) == repr(RandomGATLabels(**ints))
    params = transform.network_parameters(np.int64(3))
    assert params[0][0].shape == (3, 3)
    for value in (True, np.bool_(True), 3.0):
        with pytest.raises(TypeError, match="'num_classes' must be an int"):
            RandomGATLabels(num_classes=value)


def test_random_gat_labels_repr():
    t = RandomGATLabels(
        num_layers=3,
        num_classes=4,
        seed=7,
        act='tanh',
        negative_slope=0.0,
        init='torch_default',
        n_init=2,
    )
    assert str(t) == (
        'RandomGATLabels(num_layers=3, num_classes=4, seed=7, '
        "act='tanh', negative_slope=0.0, init='torch_default', "
        'n_init=2)'
    )


@withPackage('sklearn')
def test_random_gat_labels_on_cora(tmp_path):
    from torch_geometric.datasets import Planetoid

    src = osp.join(DATA, 'Planetoid', 'Cora')
    if not osp.isdir(src):
        pytest.skip(f"Cora is not available at '{src}'")
    shutil.copytree(src, tmp_path / 'Cora')
    cora = Planetoid(str(tmp_path), 'Cora')[0]

    # As a pre_transform on the real graph (d = 1433, one layer; one K-means
    # run keeps the test fast):
    t = RandomGATLabels(num_layers=1, num_classes=7, seed=0, n_init=1)
    dataset = Planetoid(
        str(tmp_path), 'Cora', pre_transform=t, force_reload=True
    )
    data = dataset[0]
    assert torch.equal(data.x, cora.x)
    assert torch.equal(data.edge_index, cora.edge_index)
    assert torch.equal(data.train_mask, cora.train_mask)
    assert data.y.size() == cora.y.size()
    assert set(data.y.tolist()) == set(range(7))
    assert not torch.equal(data.y, cora.y)
    assert dataset.num_classes == 7


@withPackage('sklearn')
def test_random_gat_labels_rejects_non_finite_input():
    # These failed inside scikit-learn's KMeans ('Input X contains NaN').
    data = random_graph()
    for value in [float('inf'), -float('inf')]:
        with pytest.raises(ValueError, match="'negative_slope' must be a fin"):
            RandomGATLabels(negative_slope=value)
    for value in [float('nan'), float('inf')]:
        x = data.x.clone()
        x[3, 1] = value
        with pytest.raises(ValueError, match=r"finite node features 'x'.*1"):
            RandomGATLabels()(Data(x=x, edge_index=data.edge_index))
        with pytest.raises(ValueError, match="finite node features 'x'"):
            RandomGATLabels().embed(x, data.edge_index)
    # Finite features whose network output overflows float64:
    x = data.x.double() / data.x.abs().max()
    with pytest.raises(ValueError, match='overflowed.*rescale'):
        RandomGATLabels()(Data(x=x * 1.7e308, edge_index=data.edge_index))
    # or whose squared distances overflow in K-means, which then found
    # 'fewer than num_classes distinct clusters':
    with pytest.raises(ValueError, match='too large for K-means.*rescale'):
        RandomGATLabels()(Data(x=x * 1e200, edge_index=data.edge_index))
    assert (
        RandomGATLabels()(Data(x=x * 1e50, edge_index=data.edge_index))
        .y.unique()
        .numel()
        == 2
    )
    with pytest.raises(ValueError, match=r'shape \[num_nodes, num_features\]'):
        RandomGATLabels().embed(data.x.view(-1), data.edge_index)


def test_random_gat_labels_rejects_seeds_beyond_the_generator():
    # A seed of 2**64 or more failed later, in torch.Generator.manual_seed,
    # with 'Overflow when unpacking long long'.
    with pytest.raises(ValueError, match=r"'seed' must be below 2\*\*64"):
        RandomGATLabels(seed=2**64)
    assert RandomGATLabels(seed=2**64 - 1).network_parameters(2)
