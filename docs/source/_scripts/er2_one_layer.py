r"""Why the one-layer models stop at 99.2% on ER with 2 classes (Table 1).

Trains the one-layer model of the given name (default: GATE) on the ``er2``
graph of ``examples/self_sufficient.py`` with its settings (seed 0), then
prints the training nodes it gets wrong with their neighbours' labels, and
how much attention the correctly classified nodes give to neighbours of the
other label and to themselves.

    python docs/source/_scripts/er2_one_layer.py [GATE|GATE_S|GAT_S|GAT]
"""

import os
import sys
import tempfile

import torch

sys.path.insert(
    0, os.path.join(os.path.dirname(__file__), '..', '..', '..', 'examples')
)
from self_sufficient import load  # noqa: E402
from synthetic_common import Task, build_model, train_run  # noqa: E402
from torch_geometric.utils import scatter  # noqa: E402

name = sys.argv[1] if len(sys.argv) > 1 else 'GATE'
torch.set_num_threads(1)
data, num_classes = load('er2', 0, tempfile.mkdtemp(), None)
task = Task('er2', 'ours', name, 1, 0, 64, 0.005, 10000, 1e-4)
torch.manual_seed(task.seed)
model = build_model(name, data.num_features, 64, num_classes, 1)
result = train_run(model, data, task)
print(
    f'{name}: {result.epochs_run} epochs, training loss '
    f'{result.min_train_loss:.4f}, training accuracy '
    f'{100 * result.final_train_acc:.1f}%'
)

model.eval()
with torch.no_grad():
    conv = model.convs[0]
    out, (ei, alpha) = conv(
        data.x, data.edge_index, return_attention_weights=True
    )
src, dst = ei
alpha = alpha.mean(-1)
y, n = data.y, data.num_nodes
other = (y[src] != y[dst]).float()
loop = (src == dst).float()
to_other = scatter(alpha * other, dst, dim_size=n, reduce='sum')
to_self = scatter(alpha * loop, dst, dim_size=n, reduce='sum')
has_other = scatter(other, dst, dim_size=n, reduce='sum') > 0
wrong = (out.argmax(-1) != y) & data.train_mask
print(
    f'wrong training nodes: {int(wrong.sum())} of {int(data.train_mask.sum())}'
)
for v in wrong.nonzero().view(-1).tolist():
    labels = y[data.edge_index[0][data.edge_index[1] == v]].tolist()
    print(f'  node {v}: label {int(y[v])}, neighbour labels {labels}')
print(
    'training nodes with a neighbour of the other label: '
    f'{int((has_other & data.train_mask).sum())}, '
    f'of which wrong: {int((has_other & wrong).sum())}'
)
right = ~wrong & has_other
print(
    'correct nodes with such a neighbour: mean attention to neighbours of '
    f'the other label {float(to_other[right].mean()):.3f}, to themselves '
    f'{float(to_self[right].mean()):.3f}'
)
lin = conv.lin if hasattr(conv, 'att_self') else conv.lin_l
print('value matrix W (rows: output class, columns: input label):')
print(lin.weight.detach())
