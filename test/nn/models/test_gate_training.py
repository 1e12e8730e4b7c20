import pytest
import torch
import torch.nn.functional as F
from torch_geometric.utils import erdos_renyi_graph

from torch_geometric_gate.nn.models import GATE


def _self_sufficient_graph(num_nodes, edge_prob, num_classes, seed):
    # The paper's self-sufficient task: an ER graph, random labels, and the
    # one-hot label as the node feature.
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    edge_index = erdos_renyi_graph(num_nodes, edge_prob)
    y = torch.randint(0, num_classes, (num_nodes,), generator=gen)
    return F.one_hot(y, num_classes).float(), edge_index, y


@pytest.mark.parametrize('seed', [0, 1])
def test_gate_switches_off_aggregation_on_self_sufficient_task(seed):
    torch.manual_seed(seed)
    x, edge_index, y = _self_sufficient_graph(200, 0.01, 2, seed)
    assert edge_index.size(1) > 200  # Most nodes have neighbors.

    torch.manual_seed(seed)
    model = GATE(2, 64, num_layers=3, out_channels=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
    for _ in range(400):  # The paper's setting; stop at loss < 1e-4.
        optimizer.zero_grad()
        out, alphas = model.forward_with_self_attention(x, edge_index)
        loss = F.cross_entropy(out, y)
        if float(loss.detach()) < 1e-4:
            break
        loss.backward()
        optimizer.step()

    assert float(loss.detach()) < 1e-4
    assert bool((out.argmax(dim=-1) == y).all())
    means = [float(alpha_vv.detach().mean()) for alpha_vv in alphas]
    assert means[0] > 0.7, means
    assert all(mean > 0.95 for mean in means[1:]), means
