r"""One row per dataset and depth, one column per model: the compact form of
the ``results_summary.csv`` that ``examples/real_graphs.py`` writes, for the
docs' results page. Each cell is the test metric (%) of the model, mean ±
95% CI over the splits; the last columns are the paper's numbers for GAT,
GATE and GATE_S (Appendix D; ``*``: the paper's mark, see the results
page)::

    python docs/source/_scripts/real_graphs_table.py \
        docs/source/_data/real_graphs/small_paper_summary.csv \
        > docs/source/_data/real_graphs/small_paper_table.csv

``--column`` picks another quantity of the summary (the binary sets'
balanced accuracy at the epoch that validation balanced accuracy selects:
``bal_sel_test_bal_acc``, what the paper's numbers are); ``--no-paper``
leaves the paper's columns out (for the ROC AUC of the binary sets, which
the paper's columns are not).

With ``--best-epochs``, from the per-run ``results.csv`` instead: the
median epoch selected on validation, and the mean alpha_vv of the selected
epoch averaged over the layers and splits (attention models), per dataset,
depth and model::

    python docs/source/_scripts/real_graphs_table.py --best-epochs \
        docs/source/_data/real_graphs/small_paper_results.csv
"""

import argparse
import csv
import math
import os
import statistics
import sys

sys.path.insert(
    0, os.path.join(os.path.dirname(__file__), '..', '..', '..', 'examples')
)
from real_graphs import MODELS as ALL_MODELS  # noqa: E402
from real_graphs import STRONG_ONLY  # noqa: E402

# The models of the paper's tables (the strong recipe's are extra):
MODELS = [m for m in ALL_MODELS if m not in STRONG_ONLY]
PAPER = ['GAT', 'GATE', 'GATE_S']

parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
parser.add_argument(
    'summary',
    help="a 'results_summary.csv' ('results.csv' with --best-epochs)",
)
parser.add_argument('--best-epochs', action='store_true')
parser.add_argument(
    '--column',
    default='test',
    help="the summary's quantity: 'test' (the metric that selects, ROC "
    "AUC on the binary sets) or e.g. 'bal_sel_test_bal_acc' (balanced "
    'accuracy at the epoch that validation balanced accuracy selects, '
    "the paper's Table 2 quantity)",
)
parser.add_argument(
    '--no-paper',
    action='store_true',
    help="leave out the paper's columns (where they hold another quantity)",
)
args = parser.parse_args()


def best_epochs(path: str):
    with open(path, newline='') as f:
        runs = list(csv.DictReader(f))
    groups = {}
    for run in runs:
        key = (run['dataset'], run['recipe'], int(run['num_layers']))
        groups.setdefault(key, {}).setdefault(run['model'], []).append(run)
    out = csv.writer(sys.stdout, lineterminator='\n')
    out.writerow(
        [
            'dataset',
            'recipe',
            'L',
            'model',
            'n',
            'median best epoch',
            'min-max',
            'mean alpha_vv (selected epoch)',
        ]
    )
    for key in sorted(groups):
        for model in MODELS:
            got = groups[key].get(model, [])
            if not got:
                continue
            epochs = [int(r['best_epoch']) for r in got]
            alphas = [
                float(a) for r in got for a in r['alpha_vv_mean'].split()
            ]
            out.writerow(
                [
                    *key,
                    model,
                    len(got),
                    statistics.median(epochs),
                    f'{min(epochs)}-{max(epochs)}',
                    f'{statistics.mean(alphas):.2f}' if alphas else '-',
                ]
            )


if args.best_epochs:
    best_epochs(args.summary)
    sys.exit()

with open(args.summary, newline='') as f:
    rows = list(csv.DictReader(f))

cells, order = {}, []
for row in rows:
    key = (row['dataset'], row['recipe'], int(row['L']))
    if key not in cells:
        cells[key] = {}
        order.append(key)
    if f'{args.column}_mean' not in row:
        sys.exit(
            f"{args.summary}: no numeric '{args.column}_mean' column; "
            'rewrite it with real_graphs.py --tables-only (this version), '
            'or choose another --column'
        )
    mean, ci, n = (
        float(row[f'{args.column}_{p}']) for p in ('mean', 'ci', 'n')
    )
    test = f'{mean:.2f}' + ('' if math.isnan(ci) else f' ± {ci:.2f}')
    cells[key][row['model']] = (
        f'{test} (n={n:.0f})',
        row['paper'],
    )

out = csv.writer(sys.stdout, lineterminator='\n')
paper = [] if args.no_paper else PAPER
out.writerow(
    ['dataset', 'recipe', 'L', *MODELS, *(f'paper {m}' for m in paper)]
)
for key in order:
    got = cells[key]
    out.writerow(
        [
            *key,
            *(got[m][0] if m in got else '-' for m in MODELS),
            *(got[m][1] if m in got and got[m][1] else '-' for m in paper),
        ]
    )
