import math
import numbers
import warnings
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform
from torch_geometric.utils import remove_self_loops, scatter, softmax

from torch_geometric_gate.utils._validation import (
    as_int,
    as_real,
    check_edge_index,
    check_homogeneous,
)

_ACTIVATIONS: Dict[str, Callable[[Tensor], Tensor]] = {
    'relu': F.relu,
    'elu': F.elu,
    'tanh': torch.tanh,
    'identity': lambda x: x,
}
_INITS = ('xavier_uniform', 'xavier_normal', 'torch_default')
# The largest network output K-means gets: its squared distances and their
# sums over nodes and features must stay far below float64's 1.8e308.
_KMEANS_MAX = 1e100


class RandomGATLabels(BaseTransform):
    r"""Gives a graph *neighbor-dependent* node labels: the K-means clusters
    of the output of a random GAT network, as in Sec. 5.1 ("Learning
    neighbor-dependent node labels") of the `"GATE: How to Keep Out
    Intrusive Neighbors" <https://arxiv.org/abs/2406.00418>`_ paper.

    Tests the *neighbor-dependent* end of the spectrum: the label of a node
    is a function of its :math:`k`-hop neighborhood, so a model has to
    aggregate (:math:`\alpha_{v,v} \to 0`).

    The random network :math:`M_k` has :obj:`num_layers` (:math:`k`)
    GATv2-style layers of width :math:`d`, the number of input features.
    Layer :math:`l` maps :math:`\mathbf{h}^{l-1}` to

    .. math::
        \mathbf{h}^{l}_v = \sigma\left( \sum_{u \in \mathcal{N}(v)}
        \alpha^l_{u,v} \mathbf{W}^l_s \mathbf{h}^{l-1}_u \right),
        \qquad
        \alpha^l_{u,v} = \underset{u \in \mathcal{N}(v)}{\mathrm{softmax}}
        \left( {\mathbf{a}^l}^{\top} \mathrm{LeakyReLU}\left(
        \mathbf{W}^l_s \mathbf{h}^{l-1}_u +
        \mathbf{W}^l_t \mathbf{h}^{l-1}_v \right) \right),

    with :math:`\sigma` the activation :obj:`act` (none after the last
    layer), one head and no bias: the layer of
    :class:`~torch_geometric.nn.conv.GATv2Conv` with
    :obj:`add_self_loops=False, bias=False`.
    The network runs on the graph *without* self-loops (loops present in the
    input are dropped), so :math:`v \notin \mathcal{N}(v)`: a node's own
    features reach its output only through the attention scores and through
    paths of length two and more.
    The outputs :math:`\mathbf{h}^{k}_v` are clustered into
    :obj:`num_classes` groups with :class:`sklearn.cluster.KMeans`
    (k-means++, seeded), and the cluster index becomes :obj:`data.y`.

    The paper fixes the architecture only up to "a random GAT network with
    :math:`k` layers of width :math:`d`, Xavier-initialized". The choices it
    leaves open are arguments here:

    * :obj:`act`: the activation between layers. The paper's GAT (Sec. 3,
      Eq. (1)) takes a positively homogeneous activation such as ReLU or
      LeakyReLU, and the authors' generator used a ReLU. The default is
      ELU, the activation of the original GAT, a deliberate departure from
      both: a ReLU often kills a width-2 network. For :math:`k = 3` on
      :math:`G(1000, 0.01)` with :math:`d = 2` and features from
      :math:`\mathcal{N}(\mathbf{0}, \mathbf{I}_2)`, 18 of the seeds 0 to
      29 give ReLU outputs of rank below 2 (all nodes on one line, often a
      tiny cluster), ELU's none (the test suite checks both counts).
      :obj:`act="relu"` is the paper's and the scripts' choice.
    * :obj:`negative_slope`: the non-linearity inside the score. The default
      :obj:`0.2` is GATv2's LeakyReLU ("GAT" means GATv2 in the paper).
      The authors' generator used a ReLU (:obj:`negative_slope=0.0`).
    * :obj:`init`: the paper says Xavier (:obj:`"xavier_uniform"`, as
      :class:`~torch_geometric.nn.conv.GATv2Conv` initializes). The authors'
      generator used PyTorch's default :class:`torch.nn.Linear` init
      instead; :obj:`"torch_default"` reproduces that for the weight
      matrices (uniform in :math:`\pm 1/\sqrt{d}`) and draws the attention
      vectors Xavier-normal as the authors' GAT did. Their generator was not
      seeded, so their exact graphs cannot be regenerated; they are
      compared with ours in the test suite.

    The authors' generator also shared :math:`\mathbf{W}^l_s =
    \mathbf{W}^l_t` (a GAT\ :sub:`S` network); here the two are drawn
    independently, as in the paper's GAT, and no argument shares them.

    All parameters are drawn from a private :class:`torch.Generator` seeded
    with :obj:`seed`, and K-means gets :obj:`random_state=seed` (both read
    :obj:`seed` modulo :math:`2^{32}`): the same
    arguments and the same graph give the same labels, and the caller's
    global random state is left alone. The network is evaluated in
    :obj:`float64` on the CPU, whatever the device of the graph (so that
    its labels are the same on every device); the labels go to the device
    of :obj:`data.x`. The input :class:`~torch_geometric.data.Data` is not
    modified; the returned copy differs from it in :obj:`y` only, so the
    transform is safe as a :obj:`pre_transform`.
    It works on any graph with node features, e.g. to make a
    neighbor-dependent variant of :class:`~torch_geometric.datasets.Planetoid`
    (the network is :math:`d \times d`, so many features cost
    :math:`O(k |\mathcal{E}| d)` memory and :math:`O(k N d^2)` time).

    Args:
        num_layers (int, optional): The number of layers :math:`k` of the
            random network, i.e. the number of hops the labels depend on.
            (default: :obj:`1`)
        num_classes (int, optional): The number of clusters, i.e. classes.
            (default: :obj:`2`)
        seed (int, optional): The seed of the network's parameters and of
            K-means, in :math:`[0, 2^{64})` (PyTorch's CPU generator reads
            its low 32 bits: seeds equal modulo :math:`2^{32}` draw alike).
            (default: :obj:`0`)
        act (str, optional): The activation between layers
            (:obj:`"relu"`, :obj:`"elu"`, :obj:`"tanh"` or
            :obj:`"identity"`). (default: :obj:`"elu"`)
        negative_slope (float, optional): The negative slope of the
            LeakyReLU in the attention score, finite and non-negative;
            :obj:`0.0` is a ReLU.
            (default: :obj:`0.2`)
        init (str, optional): The initialization of the parameters
            (:obj:`"xavier_uniform"`, :obj:`"xavier_normal"` or
            :obj:`"torch_default"`). (default: :obj:`"xavier_uniform"`)
        n_init (int, optional): The number of K-means restarts.
            (default: :obj:`10`)

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from torch_geometric.utils import erdos_renyi_graph
        >>> from torch_geometric_gate.transforms import RandomGATLabels
        >>> x = torch.randn(100, 2)
        >>> edge_index = erdos_renyi_graph(100, 0.05)
        >>> data = Data(x=x, edge_index=edge_index)
        >>> transform = RandomGATLabels(num_layers=2, num_classes=3, seed=1)
        >>> transform
        RandomGATLabels(num_layers=2, num_classes=3, seed=1, act='elu',
                        negative_slope=0.2, init='xavier_uniform', n_init=10)
        >>> out = transform(data)
        >>> out.y.shape, int(out.y.max()) + 1, data.y is None
        (torch.Size([100]), 3, True)
        >>> torch.equal(transform(data).y, out.y)
        True
    """

    def __init__(
        self,
        num_layers: int = 1,
        num_classes: int = 2,
        seed: int = 0,
        act: str = 'elu',
        negative_slope: float = 0.2,
        init: str = 'xavier_uniform',
        n_init: int = 10,
    ) -> None:
        num_layers = as_int(num_layers, 'num_layers', 1)
        num_classes = as_int(num_classes, 'num_classes', 2)
        seed = as_int(seed, 'seed', 0)
        n_init = as_int(n_init, 'n_init', 1)
        negative_slope = as_real(negative_slope)
        if act not in _ACTIVATIONS:
            raise ValueError(
                f"'act' must be one of {sorted(_ACTIVATIONS)} (got {act!r})"
            )
        if seed >= 2**64:
            raise ValueError(
                f"'seed' must be below 2**64, the range of torch.Generator "
                f'(got {seed})'
            )
        if (
            isinstance(negative_slope, bool)
            or not isinstance(negative_slope, numbers.Real)
            or not 0 <= negative_slope < math.inf
        ):
            raise ValueError(
                "'negative_slope' must be a finite non-negative number "
                f'(got {negative_slope!r})'
            )
        if init not in _INITS:
            raise ValueError(
                f"'init' must be one of {list(_INITS)} (got {init!r})"
            )
        self.num_layers = num_layers
        self.num_classes = num_classes
        self.seed = seed
        self.act = act
        self.negative_slope = float(negative_slope)
        self.init = init
        self.n_init = n_init

    def network_parameters(
        self, num_features: int
    ) -> List[Tuple[Tensor, ...]]:
        r"""Returns the parameters :math:`(\mathbf{W}^l_s, \mathbf{W}^l_t,
        \mathbf{a}^l)` of every layer of the random network for
        :obj:`num_features` input features, drawn afresh from :obj:`seed`
        (in :obj:`float64`; the matrices are :obj:`[out, in]`).
        """
        num_features = as_int(num_features, 'num_features', 1)
        gen = torch.Generator().manual_seed(self.seed)
        d = num_features

        def uniform(shape, bound: float) -> Tensor:
            u = torch.rand(shape, generator=gen, dtype=torch.float64)
            return (2 * u - 1) * bound

        def normal(shape, std: float) -> Tensor:
            return torch.randn(shape, generator=gen, dtype=torch.float64) * std

        params = []
        for _ in range(self.num_layers):
            layer = []
            for shape in ((d, d), (d, d), (d,)):
                fan_in, fan_out = (
                    (shape[-1], shape[0]) if len(shape) == 2 else (d, 1)
                )  # attention vector: a [1, d] matrix
                if self.init == 'xavier_uniform':
                    layer.append(
                        uniform(shape, math.sqrt(6 / (fan_in + fan_out)))
                    )
                elif self.init == 'xavier_normal' or len(shape) == 1:
                    layer.append(
                        normal(shape, math.sqrt(2 / (fan_in + fan_out)))
                    )
                else:  # 'torch_default': nn.Linear's kaiming_uniform(a=√5)
                    layer.append(uniform(shape, 1 / math.sqrt(fan_in)))
            params.append(tuple(layer))
        return params

    def embed(self, x: Tensor, edge_index: Tensor) -> Tensor:
        r"""Returns the output :math:`\mathbf{h}^{k}` of the random network
        (in :obj:`float64`, computed on the CPU, on the device of :obj:`x`),
        the representation that K-means clusters.

        Args:
            x (torch.Tensor): The node features :obj:`[num_nodes, d]`, real
                (a sparse tensor is made dense) and all finite (NaN or
                infinite values raise a :class:`ValueError`, as does an
                output that overflows).
            edge_index (torch.Tensor): The edge indices :obj:`[2, E]`
                (source to target, integers in :obj:`[0, num_nodes)`);
                self-loops are dropped.
        """
        return self._embed(x, edge_index).to(x.device)

    def _embed(self, x: Tensor, edge_index: Tensor) -> Tensor:
        # `embed` on the CPU, where the parameters are drawn, K-means runs
        # and the sums have one order (CUDA's scatter has none).
        if not isinstance(x, Tensor) or x.dim() != 2 or x.size(1) < 1:
            got = list(x.size()) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(
                "Expected node features 'x' of shape [num_nodes, "
                f'num_features] (got {got})'
            )
        if x.is_complex():
            # (Cast to float64, the imaginary part was dropped silently.)
            raise ValueError(
                f"Expected real node features 'x' (got {x.dtype})"
            )
        if x.layout != torch.strided:  # The network's products are dense.
            x = x.to_dense()
        num_bad = int((~torch.isfinite(x)).sum())
        if num_bad > 0:
            raise ValueError(
                f"Expected finite node features 'x' (got {num_bad} NaN or "
                f'infinite values of {x.numel()})'
            )
        num_nodes = x.size(0)
        x = x.detach().cpu()
        if isinstance(edge_index, Tensor):
            edge_index = edge_index.cpu()
        edge_index = check_edge_index(edge_index, num_nodes)
        edge_index, _ = remove_self_loops(edge_index)
        src, dst = edge_index[0], edge_index[1]
        act = _ACTIVATIONS[self.act]

        h = x.to(torch.float64)
        for i, (w_src, w_dst, att) in enumerate(
            self.network_parameters(x.size(1))
        ):
            h_src, h_dst = h @ w_src.t(), h @ w_dst.t()
            score = F.leaky_relu(h_src[src] + h_dst[dst], self.negative_slope)
            alpha = softmax(score @ att, dst, num_nodes=num_nodes)
            h = scatter(
                alpha.unsqueeze(-1) * h_src[src],
                dst,
                dim=0,
                dim_size=num_nodes,
                reduce='sum',
            )
            if i < self.num_layers - 1:
                h = act(h)
        if not bool(torch.isfinite(h).all()):
            raise ValueError(
                'The random network overflowed float64 (its output holds '
                "NaN or infinite values): the node features 'x' are too "
                f'large (largest magnitude {float(x.abs().max()):.3g}); '
                'rescale them'
            )
        return h

    def forward(self, data: Data) -> Data:
        try:
            from sklearn.cluster import KMeans
            from sklearn.exceptions import ConvergenceWarning
        except ImportError as e:  # pragma: no cover
            raise ImportError(
                "'RandomGATLabels' needs scikit-learn for K-means; install "
                "it with 'pip install scikit-learn' or "
                "'pip install torch-geometric-gate[full]'"
            ) from e

        check_homogeneous(data, 'RandomGATLabels')
        if getattr(data, 'x', None) is None:
            raise ValueError("'RandomGATLabels' needs node features 'data.x'")
        if getattr(data, 'edge_index', None) is None:
            raise ValueError(
                "'RandomGATLabels' needs the graph as 'data.edge_index'"
            )
        if data.num_nodes < self.num_classes:
            raise ValueError(
                f'The graph has {data.num_nodes} nodes, fewer than '
                f"'num_classes' ({self.num_classes}) clusters"
            )

        h = self._embed(data.x, data.edge_index)
        largest = float(h.abs().max()) if h.numel() > 0 else 0.0
        if largest > _KMEANS_MAX:
            # K-means squares distances: its float64 sums overflow, and it
            # then finds fewer clusters than asked for.
            raise ValueError(
                f'The random network outputs values up to {largest:.3g}, '
                f'too large for K-means (expected at most '
                f"{_KMEANS_MAX:.0e}); rescale the node features 'x'"
            )
        kmeans = KMeans(
            n_clusters=self.num_classes,
            init='k-means++',
            n_init=self.n_init,
            random_state=self.seed % 2**32,
        )
        with warnings.catch_warnings():  # Too few distinct points: below.
            warnings.simplefilter('ignore', ConvergenceWarning)
            y = kmeans.fit_predict(h.numpy())
        if len(set(y.tolist())) < self.num_classes:
            raise ValueError(
                f'The random network maps the nodes to fewer than '
                f"'num_classes' ({self.num_classes}) distinct clusters; try "
                f"another 'seed' or 'act', or a graph with more edges"
            )
        data.y = torch.from_numpy(y).to(data.x.device, torch.long)
        return data

    def __repr__(self) -> str:
        return (
            f'{self.__class__.__name__}(num_layers={self.num_layers}, '
            f'num_classes={self.num_classes}, seed={self.seed}, '
            f'act={self.act!r}, negative_slope={self.negative_slope}, '
            f'init={self.init!r}, n_init={self.n_init})'
        )
