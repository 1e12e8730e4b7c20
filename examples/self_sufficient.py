r"""The paper's self-sufficient task (Sec. 5.1, Table 1): node labels that a
node's own features determine completely, so every neighbour is noise.

Trains GAT_S, GAT, GATE_S and GATE (width 64, Adam lr 0.005, no weight decay
or dropout, up to 10000 epochs, stopping once the training loss is below
1e-4, looks-linear orthogonal init; Appendix C) of depth 1, 2 and 5 on

- ``er2``, ``er8``: Erdos-Renyi graphs (N=1000, p=0.01) with 2 or 8 random
  classes and the one-hot label as the feature (``SelfSufficientER``,
  random 2:1:1 split);
- ``cora-orig``, ``cora-rand``: Cora's graph and public split with its own
  labels or 7 random ones, one-hot label features.

Writes ``table1.md`` and ``table1.csv`` (test accuracy at the epoch of
minimum training loss, and that epoch: the paper's Table 1 metric) and, per
run, the alpha_vv history and final histogram plots to ``--out-dir``.

    python examples/self_sufficient.py --quick   # a few minutes on 2 cores
    python examples/self_sufficient.py           # the full Table 1
"""

import argparse
import functools
import os
import shutil
import tempfile
import time

import torch
from _experiment import (
    SYNTHETIC_MODELS as MODELS,
)
from _experiment import (
    Task,
    add_training_args,
    check_unique,
    run_summary,
    run_synthetic,
    train_task,
    write_tables,
)
from torch_geometric.datasets import Planetoid
from torch_geometric.transforms import Compose

from torch_geometric_gate._cli import int_at_least
from torch_geometric_gate.datasets import SelfSufficientER
from torch_geometric_gate.transforms import OneHotLabelFeatures, RandomLabels

DATASETS = ('er2', 'er8', 'cora-orig', 'cora-rand')
SHARED_PLANETOID = os.path.join(
    os.path.dirname(__file__), '..', '..', 'shared', 'data', 'Planetoid'
)

# The paper's Table 1 (test accuracy @ epoch of minimum training loss):
PAPER = {
    ('cora-orig', 1): ('99.1@215', '97.7@166', '99.0@127'),
    ('cora-orig', 2): ('93.4@218', '94.5@158', '99.6@35'),
    ('cora-orig', 5): ('85.9@92', '85.5@72', '98.4@36'),
    ('cora-rand', 1): ('99.4@263', '99.8@268', '100@104'),
    ('cora-rand', 2): ('61.7@2088', '52.8@341', '99.9@36'),
    ('cora-rand', 5): ('35.1@609', '32.1@1299', '99.9@23'),
    ('er2', 1): ('100@341', '100@182', '100@1313'),
    ('er2', 2): ('99.2@100', '99.2@119', '99.6@79'),
    ('er2', 5): ('64.0@7778', '99.6@239', '100@45'),
    ('er8', 1): ('88.8@9578', '98.4@3290', '99.2@1755'),
    ('er8', 2): ('90.4@2459', '94.8@2237', '99.6@44'),
    ('er8', 5): ('23.6@8152', '26.0@8121', '100@28'),
}


def load(name, seed, tmp_root, planetoid_root):
    if name in ('er2', 'er8'):
        dataset = SelfSufficientER(
            os.path.join(tmp_root, f'{name}_{seed}'),
            num_nodes=1000,
            edge_prob=0.01,
            num_classes=int(name[2:]),
            seed=seed,
        )
        return dataset[0], dataset.num_classes
    transform = OneHotLabelFeatures(7)
    if name == 'cora-rand':
        transform = Compose([RandomLabels(7, seed=seed), transform])
    return Planetoid(planetoid_root, 'Cora', transform=transform)[0], 7


def run_one(config, task, pbar=None):
    r"""Trains one run of the table (in a worker process with ``--jobs``)."""
    data, num_classes = load(
        task.dataset, task.seed, config['tmp_root'], config['planetoid_root']
    )
    return train_task(
        task,
        data,
        num_classes,
        config['plot_dir'],
        pbar,
        config['compile_after'],
    )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument(
        '--quick',
        action='store_true',
        help='er8 and cora-rand, depths 1 and 5, at most 200 epochs '
        'per run (minutes)',
    )
    parser.add_argument(
        '--datasets',
        nargs='+',
        default=None,
        choices=DATASETS,
        help='default: all; with --quick: er8 cora-rand',
    )
    parser.add_argument(
        '--depths',
        nargs='+',
        type=int_at_least(1),
        default=None,
        help='default: 1 2 5; with --quick: 1 5',
    )
    parser.add_argument(
        '--models', nargs='+', default=list(MODELS), choices=MODELS
    )
    parser.add_argument(
        '--seed',
        type=int_at_least(0),
        default=0,
        help='seed of the graph, labels and model init',
    )
    parser.add_argument(
        '--data-root',
        default=None,
        help='a Planetoid root holding Cora/raw (default: a '
        'temporary copy of ../shared/data/Planetoid, or a '
        'download when that is missing)',
    )
    parser.add_argument(
        '--out-dir', default=os.path.join('runs', 'self_sufficient')
    )
    add_training_args(parser)
    args = parser.parse_args(argv)
    check_unique(parser, args, 'datasets', 'depths', 'models')
    return args


def main():
    args = parse_args()
    if args.quick:
        args.max_epochs = min(args.max_epochs, 200)
        args.datasets = args.datasets or ['er8', 'cora-rand']
        args.depths = args.depths or [1, 5]
    args.datasets = args.datasets or list(DATASETS)
    args.depths = args.depths or [1, 2, 5]
    if args.threads:
        torch.set_num_threads(args.threads)

    os.makedirs(args.out_dir, exist_ok=True)
    tmp_root = tempfile.mkdtemp(prefix='gate_self_sufficient_')
    planetoid_root = args.data_root
    if planetoid_root is None:
        planetoid_root = os.path.join(tmp_root, 'Planetoid')
        if os.path.isdir(SHARED_PLANETOID):
            shutil.copytree(SHARED_PLANETOID, planetoid_root)
    config = {
        'tmp_root': tmp_root,
        'planetoid_root': planetoid_root,
        'plot_dir': None
        if args.no_plots
        else os.path.join(args.out_dir, 'plots'),
        'compile_after': args.compile_after,
    }

    tasks = [
        Task(
            dataset=d,
            source='ours' if d.startswith('er') else 'planetoid',
            model=m,
            num_layers=L,
            seed=args.seed,
            hidden=args.hidden,
            lr=args.lr,
            max_epochs=args.max_epochs,
            stop_loss=args.stop_loss,
        )
        for d in args.datasets
        for L in args.depths
        for m in args.models
    ]
    start = time.perf_counter()
    try:
        if not args.tables_only:  # no graph is needed for the tables
            for dataset in args.datasets:  # process each graph once, up front
                load(dataset, args.seed, tmp_root, planetoid_root)
        results = run_synthetic(
            tasks,
            functools.partial(run_one, config),
            os.path.join(args.out_dir, 'table1.csv'),
            args,
        )
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    total = time.perf_counter() - start

    intro = (
        f'Settings: max epochs {args.max_epochs}, lr {args.lr}, width '
        f'{args.hidden}, stop at training loss < {args.stop_loss}, seed '
        f'{args.seed}; {run_summary(args, results, total)}'
        '.\n\nTest accuracy (%) at the epoch of minimum training loss @ '
        'that epoch. `*`: the training loss never fell below the stopping '
        'threshold within the epoch budget.\n'
    )
    print(
        write_tables(
            args.out_dir,
            'table1',
            'Self-sufficient task (Table 1)',
            intro,
            table1(results, args.datasets, args.depths, args.models),
        )
    )


def table1(results, datasets, depths, models):
    r"""The paper-style table next to the paper's numbers (``summary``), and
    per run the final training accuracy, the epochs and the mean alpha_vv
    per layer (``runs``), as :func:`write_tables` takes them."""
    by_key = {(r.dataset, r.num_layers, r.model): r for r in results}
    header = (
        ['dataset', 'L']
        + [f'{m} (ours)' for m in models]
        + ['GAT_S (paper)', 'GAT (paper)', 'GATE (paper)']
    )

    def summary(cell):
        rows = []
        for dataset in datasets:
            for num_layers in depths:
                row = [dataset, str(num_layers)]
                for m in models:
                    r = by_key.get((dataset, num_layers, m))
                    row.append('not run' if r is None else cell(r))
                row += list(PAPER.get((dataset, num_layers), ('',) * 3))
                rows.append(row)
        return rows

    def at_min_loss(r):
        mark = '' if r.stopped_early else '*'
        return f'{100 * r.test_acc_at_min_loss:.1f}@{r.min_loss_epoch}{mark}'

    def at_first_full(r):
        if r.first_full_train_epoch == 0:
            return 'never'
        return (
            f'{100 * r.test_acc_at_first_full_train:.1f}'
            f'@{r.first_full_train_epoch}'
        )

    run_rows = [
        [
            r.dataset,
            str(r.num_layers),
            r.model,
            f'{100 * r.final_train_acc:.1f}',
            str(r.epochs_run),
            ' '.join(f'{v:.2f}' for v in r.final_alpha_vv_mean),
            f'{r.wall_s:.1f}',
        ]
        for r in results
    ]
    run_header = [
        'dataset',
        'L',
        'model',
        'final train acc (%)',
        'epochs',
        'mean alpha_vv per layer',
        'wall (s)',
    ]
    return [
        ('summary', None, header, summary(at_min_loss)),
        (
            'first_full',
            'Test accuracy (%) at the first epoch of 100% training accuracy '
            '@ that epoch (`never`: not reached)',
            header,
            summary(at_first_full),
        ),
        (
            'runs',
            'Final training accuracy and mean alpha_vv per layer',
            run_header,
            run_rows,
        ),
    ]


if __name__ == '__main__':
    main()
