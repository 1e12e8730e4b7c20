from typing import Optional

import torch
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform
from torch_geometric.utils import one_hot

from torch_geometric_gate.utils._validation import as_int, check_homogeneous


class OneHotLabelFeatures(BaseTransform):
    r"""Replaces the node features by the one-hot encoding of the node
    labels, :math:`\mathbf{h}^0_v = \mathbf{1}_{y_v}`, as in the
    self-sufficient Cora variants of Sec. 5.1 ("Learning self-sufficient
    node labels", Table 1) of the `"GATE: How to Keep Out Intrusive
    Neighbors" <https://arxiv.org/abs/2406.00418>`_ paper.

    Tests the *self-sufficient* end of the spectrum: every node's features
    hold its label, so any aggregation of neighbors can only hurt
    (:math:`\alpha_{v,v} \to 1`).

    Combine it with :class:`RandomLabels` (labels first) for the
    random-label variant. The input :class:`~torch_geometric.data.Data` is
    not modified; the returned copy differs from it in :obj:`x` only. The
    labels may have any integer dtype (:obj:`torch.uint8` included).

    A graph without nodes (empty :obj:`data.y`) gets features of shape
    :obj:`[0, num_classes]` when :obj:`num_classes` is given, so that such a
    graph still batches with others; without :obj:`num_classes` the width
    cannot be inferred from no labels, and a :class:`ValueError` asks for
    it.

    Args:
        num_classes (int, optional): The length of the encoding. If not
            given, :obj:`data.y.max() + 1`. (default: :obj:`None`)
        dtype (torch.dtype, optional): The feature dtype.
            (default: :obj:`torch.float`)

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from torch_geometric_gate.transforms import OneHotLabelFeatures
        >>> data = Data(y=torch.tensor([0, 2, 1]),
        ...             edge_index=torch.tensor([[0, 1], [1, 2]]))
        >>> OneHotLabelFeatures(num_classes=4)(data).x
        tensor([[1., 0., 0., 0.],
                [0., 0., 1., 0.],
                [0., 1., 0., 0.]])
    """

    def __init__(
        self,
        num_classes: Optional[int] = None,
        dtype: torch.dtype = torch.float,
    ) -> None:
        num_classes = as_int(num_classes, 'num_classes', 1, optional=True)
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"'dtype' must be a torch.dtype (got {dtype!r})")
        self.num_classes = num_classes
        self.dtype = dtype

    def forward(self, data: Data) -> Data:
        check_homogeneous(data, 'OneHotLabelFeatures')
        y = getattr(data, 'y', None)
        if y is None:
            raise ValueError(
                "'OneHotLabelFeatures' needs node labels 'data.y'"
            )
        if not isinstance(y, torch.Tensor):
            raise TypeError(
                "Expected integer node labels 'data.y' as a torch.Tensor of "
                f'shape [num_nodes] (got {type(y).__name__})'
            )
        if (
            y.dim() != 1
            or y.dtype.is_floating_point
            or y.dtype.is_complex
            or y.dtype == torch.bool
        ):
            raise ValueError(
                "Expected integer node labels 'data.y' of shape "
                f'[num_nodes] (got {y.dtype} {list(y.shape)})'
            )
        # PyG's `one_hot` scatters with the labels as indices, which must be
        # int32 or int64 (uint8, int8 and int16 raised inside `scatter`):
        unsigned = not y.dtype.is_signed
        y = y.long()
        if y.numel() == 0 and self.num_classes is None:
            raise ValueError(
                "Cannot infer 'num_classes' from empty node labels "
                "'data.y' (a graph without nodes); pass "
                "'OneHotLabelFeatures(num_classes=...)' to get features of "
                'shape [0, num_classes]'
            )
        if y.numel() > 0 and int(y.min()) < 0:
            if unsigned:  # uint64 labels of 2**63 and above wrapped around
                raise ValueError(
                    "Node labels 'data.y' must be below 2**63 (got a uint64 "
                    'label of at least 2**63)'
                )
            raise ValueError("Node labels 'data.y' must be non-negative")
        if (
            self.num_classes is not None
            and y.numel() > 0
            and int(y.max()) >= self.num_classes
        ):
            raise ValueError(
                f'Node label {int(y.max())} does not fit '
                f"'num_classes={self.num_classes}'"
            )
        data.x = one_hot(y, self.num_classes, dtype=self.dtype)
        return data

    def __repr__(self) -> str:
        # Every parameter: a dataset names its processed file by the repr of
        # its `pre_transform`.
        return (
            f'{self.__class__.__name__}(num_classes={self.num_classes}, '
            f'dtype={self.dtype})'
        )
