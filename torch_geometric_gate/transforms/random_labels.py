import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform

from torch_geometric_gate.utils._validation import as_int, check_homogeneous


class RandomLabels(BaseTransform):
    r"""Replaces the node labels by labels drawn uniformly at random from
    :obj:`num_classes` classes, as in the randomized-label Cora variant of
    Sec. 5.1 ("Learning self-sufficient node labels", Table 1) of the
    `"GATE: How to Keep Out Intrusive Neighbors"
    <https://arxiv.org/abs/2406.00418>`_ paper.

    Together with :class:`OneHotLabelFeatures` it tests the
    *self-sufficient* end of the spectrum on a real graph whose labels owe
    nothing to the structure: the neighbors carry no information at all.

    The labels are drawn from a private :class:`torch.Generator` seeded with
    :obj:`seed`: the same seed and number of nodes give the same labels
    (also when used as a :obj:`transform`, applied at every access), and
    the caller's global random state is left alone. They are drawn on the
    CPU (the same labels on every device) and put on the device of
    :obj:`data.x` (else of :obj:`data.edge_index`, else of any tensor of
    the graph, else on the CPU). The input
    :class:`~torch_geometric.data.Data` is not modified; the returned copy
    differs from it in :obj:`y` only.

    Args:
        num_classes (int): The number of classes.
        seed (int, optional): The seed of the labels, in
            :math:`[0, 2^{64})` (PyTorch's CPU generator reads its low 32
            bits: seeds equal modulo :math:`2^{32}` draw alike).
            (default: :obj:`0`)

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from torch_geometric.transforms import Compose
        >>> from torch_geometric_gate.transforms import (
        ...     OneHotLabelFeatures, RandomLabels)
        >>> data = Data(num_nodes=6)
        >>> transform = Compose([RandomLabels(7, seed=0),
        ...                      OneHotLabelFeatures(7)])
        >>> out = transform(data)
        >>> out.y.shape, out.x.shape, bool((out.x.argmax(1) == out.y).all())
        (torch.Size([6]), torch.Size([6, 7]), True)
        >>> torch.equal(transform(data).y, out.y)
        True
    """

    def __init__(self, num_classes: int, seed: int = 0) -> None:
        num_classes = as_int(num_classes, 'num_classes', 1)
        seed = as_int(seed, 'seed', 0)
        if seed >= 2**64:
            raise ValueError(
                f"'seed' must be below 2**64, the range of torch.Generator "
                f'(got {seed})'
            )
        self.num_classes = num_classes
        self.seed = seed

    def forward(self, data: Data) -> Data:
        check_homogeneous(data, 'RandomLabels')
        num_nodes = data.num_nodes
        if num_nodes is None:
            raise ValueError(
                "'RandomLabels' needs to know the number of "
                "nodes (set 'data.x' or 'data.num_nodes')"
            )
        gen = torch.Generator().manual_seed(self.seed)
        y = torch.randint(self.num_classes, (num_nodes,), generator=gen)
        data.y = y.to(_device(data))
        return data

    def __repr__(self) -> str:
        return (
            f'{self.__class__.__name__}({self.num_classes}, seed={self.seed})'
        )


def _device(data: Data) -> torch.device:
    # The device of the node features, else of the graph, else of any
    # tensor of `data`, else the CPU.
    for key in ('x', 'edge_index'):
        value = getattr(data, key, None)
        if isinstance(value, Tensor):
            return value.device
    for _, value in data:
        if isinstance(value, Tensor):
            return value.device
    return torch.device('cpu')
