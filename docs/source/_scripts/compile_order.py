r"""Does a compiled run depend on what ran before it in the same process?

Trains GAT (``k=2``, ``L=2``, seed 0 on the authors' graph, 330 epochs,
compiled after 300) either alone (``fresh``) or after seven runs of other
rows (``after``), the way a worker of ``--jobs`` meets it, and prints its
minimum training loss and final alpha_vv to the last digit. With
``--no-reset``, the dynamo reset that :func:`train_run` does before it
compiles is switched off: the earlier runs then fill dynamo's recompile
limit for ``GATv2Conv.forward``, which then runs eagerly and rounds
differently.

    python docs/source/_scripts/compile_order.py fresh
    python docs/source/_scripts/compile_order.py after
    python docs/source/_scripts/compile_order.py after --no-reset
"""

import os
import sys

import torch

sys.path.insert(
    0, os.path.join(os.path.dirname(__file__), '..', '..', '..', 'examples')
)
from neighbor_dependent import load  # noqa: E402
from synthetic_common import Task, train_task  # noqa: E402

if len(sys.argv) < 2 or sys.argv[1] not in ('fresh', 'after'):
    sys.exit(__doc__)
torch.set_num_threads(1)
if '--no-reset' in sys.argv:
    torch._dynamo.reset = lambda: None
paper_data = os.path.join(
    os.path.dirname(__file__),
    *(['..'] * 4),
    'shared',
    'data',
    'gate-synthetic',
)
before = [(1, 2), (1, 3), (3, 3), (3, 4), (2, 3), (1, 1), (2, 4)]
rows = (before if sys.argv[1] == 'after' else []) + [(2, 2)]
for k, num_layers in rows:
    data, _ = load(k, paper_data, None, 0)
    task = Task(f'k{k}', 'paper', 'GAT', num_layers, 0, 64, 0.005, 330, 1e-4)
    result = train_task(task, data, 2, compile_after=300)
print(
    ' '.join(sys.argv[1:]),
    f'min loss {result.min_train_loss!r}',
    f'alpha_vv {result.final_alpha_vv_mean!r}',
)
