import pytest
import torch
from torch_geometric.data import HeteroData

import torch_geometric_gate.transforms as transforms

# Each transform with the arguments it needs:
TRANSFORMS = {
    'OneHotLabelFeatures': dict(num_classes=3),
    'RandomLabels': dict(num_classes=3),
    'RandomGATLabels': dict(num_classes=2),
}


def hetero_graph():
    data = HeteroData()
    data['paper'].x = torch.randn(10, 2)
    data['paper'].y = torch.randint(3, (10,))
    data['author'].x = torch.randn(5, 2)
    data['author'].y = torch.randint(3, (5,))
    data['author', 'writes', 'paper'].edge_index = torch.tensor(
        [[0, 1, 4], [1, 2, 9]]
    )
    return data


def test_every_transform_is_covered():
    assert sorted(TRANSFORMS) == sorted(transforms.__all__)


@pytest.mark.parametrize('name', sorted(TRANSFORMS))
def test_hetero_data_is_refused_clearly(name):
    # On a HeteroData graph, RandomLabels raised a NotImplementedError
    # without a message, and OneHotLabelFeatures and RandomGATLabels said
    # that 'data.y' or 'data.x' were missing, though every node type had
    # them.
    transform = getattr(transforms, name)(**TRANSFORMS[name])
    data = hetero_graph()
    with pytest.raises(
        TypeError,
        match=rf"^'{name}' takes a homogeneous graph "
        r'\(torch_geometric.data.Data\), not HeteroData; apply it to '
        r'data.to_homogeneous\(\)',
    ):
        transform(data)
    homogeneous = data.to_homogeneous()
    out = transform(homogeneous)
    assert out.num_nodes == 15
