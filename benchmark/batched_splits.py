r"""Does batching the splits of one ``examples/real_graphs.py``
configuration into one model pay? For every dataset, recipe, depth and model
that the ``real_graphs.py`` options select, it builds the models of the
selected splits (each freshly seeded, as the runs build them) and times one
training step (forward, cross-entropy on the split's training nodes,
backward) of all of them: one after the other, as the runs train them
today, and batched, :func:`torch.func.vmap` of :func:`torch.func.grad` over
their stacked parameters (each split its own parameters and training
nodes). The batched gradients are checked against the sequential ones
first. It writes ``batched_splits.csv`` with the milliseconds of both and their
ratio (batched / sequential, under 1 when batching pays; the median of
``--reps`` repetitions after one warm-up, as ``conv.py`` times a step) and,
on a GPU, their peak memory::

    python benchmark/batched_splits.py --reps 5 -- --datasets Texas \
        Minesweeper --depths 5 --models GATE --splits 0 1 2 3 4 5 6 7 8 9
"""

import os
import sys

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, stack_module_state, vmap

sys.path.insert(
    0,
    os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'examples'),
)
import real_graphs  # noqa: E402
from _experiment import int_at_least, split_masks  # noqa: E402
from conv import time_step  # noqa: E402
from epoch_times import (  # noqa: E402
    configurations,
    data_root,
    real_graphs_args,
    write_rows,
)

HEADER = [
    'dataset',
    'recipe',
    'L',
    'model',
    'splits',
    'device',
    'sequential ms/step',
    'batched ms/step',
    'batched / sequential',
    'sequential peak MB',
    'batched peak MB',
    'max |grad difference|',
]


def steps(config, tasks):
    r"""The sequential and the batched training step of the models of
    ``tasks`` (one configuration, several splits), and the largest absolute
    difference between their gradients."""
    models, weights = [], []
    for task in tasks:
        data, model = real_graphs.prepare(config, task)
        # functional_call calls forward; the runs train the models'
        # forward_with_self_attention, which returns (out, alphas).
        model.forward = model.forward_with_self_attention
        models.append(model)
        train_mask = split_masks(data, task.split)[0]
        weights.append(train_mask.float())
    x, edge_index, y = data.x, data.edge_index, data.y
    weight = torch.stack(weights)

    def loss_of(params, buffers, w):
        out, _ = functional_call(
            models[0],
            (params, buffers),
            (x, edge_index),
            strict=True,
        )
        loss = F.cross_entropy(out, y, reduction='none')
        return (loss * w).sum() / w.sum()

    def sequential():
        grads = []
        for model, w in zip(models, weight):
            params = dict(model.named_parameters())
            buffers = dict(model.named_buffers())
            loss = loss_of(params, buffers, w)
            grads.append(torch.autograd.grad(loss, list(params.values())))
        return grads

    params, buffers = stack_module_state(models)
    batched_grad = vmap(grad(loss_of), in_dims=(0, 0, 0))

    def batched():
        return batched_grad(params, buffers, weight)

    names = [name for name, _ in models[0].named_parameters()]
    one, many = sequential(), batched()
    with torch.no_grad():
        diff = max(
            float((many[name][i] - g).abs().max())
            for i, grads in enumerate(one)
            for name, g in zip(names, grads)
        )
    return sequential, batched, diff


def main(argv=None):
    args = real_graphs_args(
        __doc__.split('\n\n')[0],
        argv,
        reps=dict(type=int_at_least(1), default=5),
    )
    rg = args.rg
    device = torch.device(rg.device)
    rows = []
    path = os.path.join(rg.out_dir, 'batched_splits.csv')
    with data_root(rg) as root:
        config = dict(root=root, device=rg.device)
        for key, tasks in configurations(rg).items():
            sequential, batched, diff = steps(config, tasks)
            (seq, seq_peak), (bat, bat_peak) = (
                time_step(step, device, 1, args.reps)
                for step in (sequential, batched)
            )
            rows.append(
                [
                    *map(str, key),
                    str(len(tasks)),
                    str(device),
                    f'{seq:.2f}',
                    f'{bat:.2f}',
                    f'{bat / seq:.2f}',
                    '' if seq_peak is None else f'{seq_peak / 2**20:.0f}',
                    '' if bat_peak is None else f'{bat_peak / 2**20:.0f}',
                    f'{diff:.1e}',
                ]
            )
            write_rows(path, HEADER, rows)
    return rows


if __name__ == '__main__':
    main()
