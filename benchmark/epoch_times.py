r"""Seconds per training epoch of ``examples/real_graphs.py`` runs, eager
and :func:`torch.compile` d, and the projected hours of a whole table: the
budget tool that was ``real_graphs.py --time-epochs``. It times the same
loop the runs use (``examples/_experiment.py``'s ``train``: the step and the
validation metric, the evaluation pass where the recipe has dropout), N
epochs after warm-up, of split 0 of every dataset, recipe, depth and model
that the ``real_graphs.py`` options select, and writes ``epoch_times.csv``
with the hours if every run took ``max_epochs`` epochs (an upper bound for
the paper recipe, which stops after ``patience`` epochs without
improvement), from the faster of eager and compiled (process CPU time on
a CPU: the time of one process with a core of its own, whatever else loads
the machine; wall time on a GPU)::

    python benchmark/epoch_times.py --epochs 3 -- --datasets Minesweeper \
        --models GAT GATE --compile-after 0 --out-dir runs/budget
"""

import argparse
import csv
import math
import os
import shutil
import sys
import time
from contextlib import contextmanager
from dataclasses import replace

import torch

sys.path.insert(
    0,
    os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'examples'),
)
import real_graphs  # noqa: E402
from _experiment import (  # noqa: E402
    Selector,
    int_at_least,
    mask_index,
    metrics,
    split_masks,
    train,
)

HEADER = [
    'dataset',
    'recipe',
    'L',
    'model',
    's/epoch (eager, wall)',
    's/epoch (eager, process CPU)',
    's/epoch (compiled, wall)',
    's/epoch (compiled, process CPU)',
    'runs',
    'max epochs',
    'hours at max epochs (upper bound, 1 process)',
]


def time_epochs(config, task, epochs, compiled):
    r"""Wall and process CPU seconds per epoch of ``task`` over ``epochs``
    epochs of the runs' loop, after one warm-up epoch (``compiled``: two,
    compiling)."""
    data, model = real_graphs.prepare(config, task)
    metric = real_graphs.main_metric(task.dataset)
    train_mask, val_mask, _ = split_masks(data, task.split)
    train_i, val_i = mask_index(train_mask), mask_index(val_mask)
    optimizer = torch.optim.Adam(model.parameters(), lr=task.lr)
    warm = 2 if compiled else 1
    stamps = []

    def measure(out, loss, alphas):
        values = {'val': metrics(out, data.y, val_i)[metric]}
        if data.x.device.type == 'cuda':
            torch.cuda.synchronize()
        stamps.append((time.perf_counter(), time.process_time()))
        return values

    # One run of the loop: the epochs after the warm-up ones are timed,
    # from one epoch's validation metric to the next one's.
    train(
        model,
        optimizer,
        data.x,
        data.edge_index,
        data.y,
        train_i,
        measure,
        [Selector('val', 'max', state_of=model)],
        warm + epochs,
        separate_eval=task.dropout > 0,
        compile_after=0 if compiled else None,
    )
    (w0, c0), (w1, c1) = stamps[warm - 1], stamps[-1]
    return (w1 - w0) / epochs, (c1 - c0) / epochs


def real_graphs_args(description, argv=None, **options):
    r"""The arguments of a benchmark over ``examples/real_graphs.py`` runs:
    its own ``options`` (name: ``add_argument`` keywords), then after
    ``--`` the options of ``real_graphs.py`` (its parsed namespace is
    ``args.rg``; its ``--out-dir`` is made and its ``--threads`` set, as
    ``real_graphs.py`` does)."""
    parser = argparse.ArgumentParser(description=description)
    for name, kwargs in options.items():
        parser.add_argument(f'--{name}', **kwargs)
    parser.add_argument(
        'real_graphs_args',
        nargs=argparse.REMAINDER,
        help="after '--': the options of examples/real_graphs.py",
    )
    args = parser.parse_args(argv)
    rest = [a for a in args.real_graphs_args if a != '--']
    args.rg = real_graphs.parse_args(rest)
    os.makedirs(args.rg.out_dir, exist_ok=True)
    if args.rg.threads:
        torch.set_num_threads(args.rg.threads)
    return args


@contextmanager
def data_root(rg):
    r"""The data folder of the runs (a temporary copy unless
    ``--data-root``), removed afterwards."""
    root, tmp_root = real_graphs.data_root(rg)
    try:
        yield root
    finally:
        if tmp_root is not None:
            shutil.rmtree(tmp_root, ignore_errors=True)


def configurations(rg):
    r"""The tasks that ``real_graphs.py``'s options ``rg`` select, grouped by
    configuration (dataset, recipe, depth, model; the splits in a group),
    in their order."""
    groups = {}
    for task in real_graphs.make_tasks(rg):
        key = (task.dataset, task.recipe, task.num_layers, task.model)
        groups.setdefault(key, []).append(task)
    return groups


def write_rows(path, header, rows):
    r"""Prints the last row and writes them all (after each row: a crash
    keeps the rest)."""
    print(' '.join(rows[-1]), flush=True)
    with open(path, 'w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def main(argv=None):
    args = real_graphs_args(
        __doc__.split('\n\n')[0],
        argv,
        epochs=dict(type=int_at_least(1), default=3),
    )
    rg = args.rg
    rows = []
    path = os.path.join(rg.out_dir, 'epoch_times.csv')
    with data_root(rg) as root:
        config = dict(root=root, device=rg.device)
        for key, tasks in configurations(rg).items():
            n = len(tasks)
            task = replace(tasks[0], split=0)
            try:
                eager, eager_cpu = time_epochs(
                    config, task, args.epochs, False
                )
                comp, comp_cpu = (
                    time_epochs(config, task, args.epochs, True)
                    if rg.compile_after is not None
                    else (math.nan, math.nan)
                )
            except (RuntimeError, MemoryError) as e:  # out of memory
                row = [*map(str, key), f'failed: {str(e)[:80]!r}']
                rows.append(row + [''] * (len(HEADER) - len(row)))
            else:
                on_cpu = rg.device == 'cpu'
                costs = [eager_cpu if on_cpu else eager]
                if not math.isnan(comp):
                    costs.append(comp_cpu if on_cpu else comp)
                best = min(costs)
                rows.append(
                    [
                        *map(str, key),
                        f'{eager:.4f}',
                        f'{eager_cpu:.4f}',
                        '' if math.isnan(comp) else f'{comp:.4f}',
                        '' if math.isnan(comp) else f'{comp_cpu:.4f}',
                        str(n),
                        str(task.max_epochs),
                        f'{best * task.max_epochs * n / 3600:.2f}',
                    ]
                )
            write_rows(path, HEADER, rows)
    return rows


if __name__ == '__main__':
    main()
