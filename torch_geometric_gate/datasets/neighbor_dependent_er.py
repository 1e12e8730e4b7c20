import inspect
from typing import Any, Callable, Optional, Sequence

import torch
from torch_geometric.data import Data

from torch_geometric_gate.transforms.random_gat_labels import RandomGATLabels
from torch_geometric_gate.utils._validation import as_int

from ._synthetic import (
    SyntheticDataset,
    check_er_args,
    child_seeds,
    er_graph,
    fmt,
    resolve_graph_method,
    split_masks,
)


class NeighborDependentER(SyntheticDataset):
    r"""The synthetic *neighbor-dependent* node classification task of
    Sec. 5.1 ("Learning neighbor-dependent node labels", Table 2) of the
    `"GATE: How to Keep Out Intrusive Neighbors"
    <https://arxiv.org/abs/2406.00418>`_ paper.

    Tests the *neighbor-dependent* end of the spectrum: a node's label is a
    function of its :math:`k`-hop neighborhood, not of its own features, so
    the best model aggregates over exactly :math:`k` hops and ignores the
    node itself (:math:`\alpha_{v,v} \to 0`).

    The dataset holds one graph: an undirected Erdős–Rényi graph
    :math:`G(N, p)` without self-loops (see :obj:`graph_method`), features
    drawn from :math:`\mathcal{N}(\mathbf{0}, \mathbf{I}_d)`, labels given by
    :class:`~torch_geometric_gate.transforms.RandomGATLabels` (the K-means
    clusters of the output of a random :math:`k`-layer GAT run on the graph
    without self-loops), and disjoint boolean :obj:`train_mask`,
    :obj:`val_mask` and :obj:`test_mask` drawn at random in the ratios of
    :obj:`split` (2:1:1, i.e. 500/250/250 nodes, by default). The paper uses
    :math:`N = 1000`, :math:`p = 0.01`, :math:`d = 2`, :math:`C = 2` and
    :math:`k \in \{1, 2, 3\}`.

    The same arguments give the same graph bit for bit: every random step
    draws from its own generator, seeded from :obj:`seed`, and the caller's
    global random state is left alone. The processed file name encodes every
    argument, those of the label generator included, and the
    :obj:`pre_transform`, by a hash of its :func:`repr` (memory addresses
    left out): a changed argument, or a :obj:`pre_transform` whose
    :func:`repr` changes, builds a new file. A change the :func:`repr` does
    not show (an edited function body, a transform whose :func:`repr`
    hides a parameter, e.g. PyG's
    :class:`~torch_geometric.transforms.RandomNodeSplit`) loads the old
    file: pass :obj:`force_reload=True`. Invalid arguments raise before
    anything is written to :obj:`root`, and an error while generating
    removes the folders the call created.

    Args:
        root (str): Root directory where the dataset should be saved.
        num_nodes (int, optional): The number of nodes :math:`N`.
            (default: :obj:`1000`)
        edge_prob (float, optional): The edge probability :math:`p`.
            (default: :obj:`0.01`)
        num_classes (int, optional): The number of classes :math:`C`
            (at least :obj:`2`, at most :obj:`num_nodes`). The dataset's
            :obj:`num_classes` is :math:`C`, also when a small graph draws
            no node of some class, or more when a :obj:`transform` or
            :obj:`pre_transform` gives labels of more classes.
            (default: :obj:`2`)
        num_features (int, optional): The feature size :math:`d`, also the
            width of the random GAT. (default: :obj:`2`)
        num_layers (int, optional): The number of layers :math:`k` of the
            random GAT, i.e. the number of hops the labels depend on.
            (default: :obj:`1`)
        split (tuple, optional): The fractions of training, validation and
            test nodes (three numbers: a sequence, a NumPy array or a
            tensor); finite, non-negative and summing to :obj:`1`.
            (default: :obj:`(0.5, 0.25, 0.25)`)
        seed (int, optional): The random seed, in :math:`[0, 2^{64})`.
            (default: :obj:`0`)
        graph_method (str, optional): How the graph is drawn.
            :obj:`'dense'`: one uniform number per node pair, the graph of
            PyG's :func:`~torch_geometric.utils.erdos_renyi_graph` after
            seeding, bit for bit, in :math:`O(N + |E|)` memory but
            :math:`O(N^2)` time. :obj:`'sparse'`: geometric skips from
            edge to edge, the same distribution (a different draw) in
            :math:`O(N + |E|)` time and memory (:math:`N = 10^6` nodes of
            mean degree 10 in seconds). :obj:`'auto'`: :obj:`'dense'` up
            to :obj:`10000` nodes, which keeps every graph generated so
            far (the paper's :math:`N = 1000` included), :obj:`'sparse'`
            above. The processed file name records the method used.
            (default: :obj:`'auto'`)
        transform (callable, optional): A function/transform that takes in a
            :class:`torch_geometric.data.Data` object and returns a
            transformed version. The data object will be transformed before
            every access. (default: :obj:`None`)
        pre_transform (callable, optional): A function/transform that takes
            in a :class:`torch_geometric.data.Data` object and returns a
            transformed version. The data object will be transformed before
            being saved to disk. (default: :obj:`None`)
        force_reload (bool, optional): Whether to re-process the dataset.
            (default: :obj:`False`)
        log (bool, optional): Whether to print :obj:`"Processing..."` and
            :obj:`"Done!"` to the console (stderr) while the dataset is
            generated. (default: :obj:`True`)
        **kwargs (optional): Further arguments of the label generator
            :class:`~torch_geometric_gate.transforms.RandomGATLabels`
            (:obj:`act`, :obj:`negative_slope`, :obj:`init`,
            :obj:`n_init`); its :obj:`seed` is derived from :obj:`seed`.

    Example:
        >>> import tempfile
        >>> from torch_geometric_gate.datasets import NeighborDependentER
        >>> dataset = NeighborDependentER(tempfile.mkdtemp(), num_layers=2)
        >>> dataset
        NeighborDependentER(num_nodes=1000, edge_prob=0.01, num_classes=2,
                            num_features=2, num_layers=2)
        >>> data = dataset[0]
        >>> data
        Data(x=[1000, 2], edge_index=[2, ...], y=[1000], train_mask=[1000],
             val_mask=[1000], test_mask=[1000])
        >>> dataset.num_classes
        2
    """

    def __init__(
        self,
        root: str,
        num_nodes: int = 1000,
        edge_prob: float = 0.01,
        num_classes: int = 2,
        num_features: int = 2,
        num_layers: int = 1,
        split: Sequence[float] = (0.5, 0.25, 0.25),
        seed: int = 0,
        graph_method: str = 'auto',
        transform: Optional[Callable] = None,
        pre_transform: Optional[Callable] = None,
        force_reload: bool = False,
        log: bool = True,
        **kwargs: Any,
    ) -> None:
        # Validate before the base class creates any directory under `root`.
        num_nodes, edge_prob, num_classes, split, seed = check_er_args(
            num_nodes, edge_prob, num_classes, split, seed
        )
        num_features = as_int(num_features, 'num_features', 1)
        self._check_label_kwargs(kwargs)
        self.num_nodes = num_nodes
        self.edge_prob = edge_prob
        self._num_classes = num_classes
        self._num_features = num_features
        self.split = split
        self.seed = seed
        self.graph_method = resolve_graph_method(graph_method, num_nodes)
        seeds = child_seeds(seed, 4)
        self._seeds = seeds
        # Validates 'num_layers' and the generator's own arguments:
        self.label_transform = RandomGATLabels(
            num_layers, num_classes, seed=seeds[3] % 2**32, **kwargs
        )
        self.num_layers = self.label_transform.num_layers  # as a Python int
        super().__init__(
            root, transform, pre_transform, force_reload=force_reload, log=log
        )

    @classmethod
    def _check_label_kwargs(cls, kwargs) -> None:
        # The label generator's own arguments, but those the dataset sets:
        label_args = [
            name
            for name in inspect.signature(RandomGATLabels).parameters
            if name not in ('num_layers', 'num_classes', 'seed')
        ]
        unknown = [name for name in kwargs if name not in label_args]
        if unknown:
            own = [
                name
                for name in inspect.signature(cls).parameters
                if name != 'kwargs'
            ]
            raise TypeError(
                f'{cls.__name__} got an unexpected keyword argument '
                f'{unknown[0]!r}; it accepts {", ".join(own)} and the label '
                f"generator's {', '.join(label_args)}"
            )

    @property
    def raw_file_names(self) -> list:
        return []

    @property
    def processed_file_names(self) -> str:
        split = '-'.join(fmt(s) for s in self.split)
        t = self.label_transform
        return (
            f'neighbor_dependent_er_n{self.num_nodes}'
            f'_p{fmt(self.edge_prob)}_c{self._num_classes}'
            f'_d{self._num_features}_k{self.num_layers}_split{split}'
            f'_seed{self.seed}'
            f'_graph-{self.graph_method}_act-{t.act}_slope{fmt(t.negative_slope)}'
            f'_init-{t.init}_ninit{t.n_init}'
            f'{self.pre_transform_tag()}.pt'
        )

    def process(self) -> None:
        graph_seed, feature_seed, split_seed, _ = self._seeds
        edge_index = er_graph(
            self.num_nodes, self.edge_prob, graph_seed, self.graph_method
        )

        gen = torch.Generator().manual_seed(feature_seed)
        x = torch.randn(self.num_nodes, self._num_features, generator=gen)

        data = Data(x=x, edge_index=edge_index)
        data = self.label_transform(data)

        data.train_mask, data.val_mask, data.test_mask = split_masks(
            self.num_nodes, self.split, split_seed
        )
        if self.pre_transform is not None:
            data = self.pre_transform(data)
        self.save([data], self.processed_paths[0])

    def __repr__(self) -> str:
        return (
            f'{self.__class__.__name__}(num_nodes={self.num_nodes}, '
            f'edge_prob={self.edge_prob}, '
            f'num_classes={self._num_classes}, '
            f'num_features={self._num_features}, '
            f'num_layers={self.num_layers})'
        )
