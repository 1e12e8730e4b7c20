import copy

import pytest
import torch
from torch_geometric.data import Data

from torch_geometric_gate.transforms import OneHotLabelFeatures


def test_one_hot_label_features():
    y = torch.tensor([2, 0, 1, 2])
    data = Data(
        x=torch.randn(4, 5), y=y, edge_index=torch.tensor([[0, 1], [1, 2]])
    )
    before = copy.copy(data)
    out = OneHotLabelFeatures()(data)
    assert out.x.dtype == torch.float
    assert torch.equal(out.x, torch.eye(3)[y])  # num_classes from data.y
    assert torch.equal(data.x, before.x)  # Input unchanged.
    assert out.edge_index is data.edge_index and out.y is data.y

    out = OneHotLabelFeatures(num_classes=5, dtype=torch.long)(data)
    assert out.x.dtype == torch.long
    assert torch.equal(out.x, torch.eye(5, dtype=torch.long)[y])
    assert str(OneHotLabelFeatures(5)) == (
        'OneHotLabelFeatures(num_classes=5, dtype=torch.float32)'
    )
    assert str(OneHotLabelFeatures(dtype=torch.float64)) == (
        'OneHotLabelFeatures(num_classes=None, dtype=torch.float64)'
    )


def test_one_hot_label_features_errors():
    with pytest.raises(ValueError, match='data.y'):
        OneHotLabelFeatures()(Data(num_nodes=3))
    with pytest.raises(ValueError, match='integer'):
        OneHotLabelFeatures()(Data(y=torch.tensor([0.0, 1.0])))
    with pytest.raises(ValueError, match='integer'):
        OneHotLabelFeatures()(Data(y=torch.tensor([[0], [1]])))
    with pytest.raises(ValueError, match='non-negative'):
        OneHotLabelFeatures()(Data(y=torch.tensor([0, -1])))
    with pytest.raises(ValueError, match='does not fit'):
        OneHotLabelFeatures(num_classes=2)(Data(y=torch.tensor([0, 2])))
    with pytest.raises(ValueError, match='at least 1'):
        OneHotLabelFeatures(num_classes=0)
    with pytest.raises(TypeError, match='num_classes'):
        OneHotLabelFeatures(num_classes=2.0)
    with pytest.raises(TypeError, match='dtype'):
        OneHotLabelFeatures(dtype='float')


def test_one_hot_label_features_empty_labels():
    # Raised a bare 'max(): Expected reduction dim to be specified ...'.
    empty = Data(y=torch.empty(0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"infer 'num_classes'.*\[0, num"):
        OneHotLabelFeatures()(empty)
    # With 'num_classes', a graph without nodes has a defined result:
    out = OneHotLabelFeatures(num_classes=3)(empty)
    assert out.x.shape == (0, 3) and out.x.dtype == torch.float


def test_one_hot_label_features_rejects_non_tensor_labels():
    # Raised "AttributeError: 'list' object has no attribute 'dim'".
    with pytest.raises(TypeError, match=r'torch.Tensor.*\[num_nodes\]'):
        OneHotLabelFeatures(num_classes=2)(Data(y=[0, 1]))


@pytest.mark.parametrize(
    'dtype',
    [
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.uint16,
        torch.uint32,
        torch.uint64,
    ],
    ids=str,
)
def test_one_hot_label_features_integer_dtypes(dtype):
    # uint8, int8 and int16 labels raised "scatter(): Expected dtype
    # int32/int64 for index" inside PyG's one_hot; the other unsigned types
    # '"min_all" not implemented'.
    y = torch.tensor([2, 0, 1, 2])
    data = Data(y=y.to(dtype))
    out = OneHotLabelFeatures()(data)
    assert torch.equal(out.x, torch.eye(3)[y])
    out = OneHotLabelFeatures(num_classes=4)(data)
    assert torch.equal(out.x, torch.eye(4)[y])
    assert out.y.dtype == dtype  # The labels are left alone.
    with pytest.raises(ValueError, match='does not fit'):
        OneHotLabelFeatures(num_classes=2)(data)


def test_one_hot_label_features_large_uint64_labels():
    # A uint64 label of 2**63 or more wraps around to a negative int64:
    y = torch.tensor([0, 2**63], dtype=torch.uint64)
    with pytest.raises(ValueError, match=r'below 2\*\*63'):
        OneHotLabelFeatures()(Data(y=y))
