r"""The tables of the real-graph runs (:mod:`gate_paper.real_graphs`) with
pandas: per dataset, recipe and depth the test metric of every model, mean
and 95% CI over the splits, next to the paper's numbers of the same
quantity; the paired differences to GAT; the selected epochs; the
Dirichlet energies; the strong recipe's depth chosen on validation."""

import math

import numpy as np
import pandas as pd

from gate_paper import data as gp_data
from gate_paper.models import MODELS
from gate_paper.paper_numbers import TABLE2, TABLE_SMALL, TABLE_STRONG
from gate_paper.stats import mean_ci95, paired_ci95
from gate_paper.tables import runs_frame

KEYS = ['dataset', 'recipe', 'num_layers', 'model', 'edges']
# The results the tables read (NaN where a run has none: diverged, or not
# a binary set).
RESULTS = [
    'test_metric',
    'val_metric',
    'bal_test_bal_acc',
    'best_epoch',
    'alpha_vv_mean',
    'energy_all_input',
    'energy_all_output',
    'energy_adj_input',
    'energy_adj_output',
]


def cell(values, diverged: int = 0) -> str:
    r"""``mean ± ci (n=n)`` in % of the finished runs' ``values`` (NaN:
    not recorded), with the number of ``diverged`` runs if any."""
    values = [v for v in values if not math.isnan(v)]
    gone = f'{diverged} diverged' if diverged else ''
    if not values:
        return gone or '-'
    mean, half = mean_ci95([100 * v for v in values])
    ci = '' if math.isnan(half) else f' ± {half:.2f}'
    return f'{mean:.2f}{ci} (n={len(values)}{"; " + gone if gone else ""})'


def difference(mean, half, n) -> str:
    r"""``mean ± half (n=n)`` of a paired difference in points; a mean that
    rounds to zero is ``0.00`` whatever its sign (two models tied on every
    split differ by float32 rounding of their accuracies)."""
    return f'{round(mean, 2) + 0.0:.2f} ± {half:.2f} (n={n})'


def finished(frame) -> pd.DataFrame:
    return frame[frame['status'] == 'finished']


def paper_cell(dataset, recipe, L, model, quantity) -> str:
    r"""The paper's number for a cell of ``quantity`` (``'test'``, the
    selection metric, or ``'bal_acc'``, balanced accuracy at the epoch of
    best validation balanced accuracy); ``-`` where the paper has none of
    that quantity."""
    binary = dataset in gp_data.ROC_AUC_DATASETS
    if recipe == 'strong':
        entry = TABLE_STRONG.get(model, {}).get(dataset)
        if entry is None or quantity != 'test':
            return '-'
        return f'{entry[0]:.2f} ± {entry[1]:.2f}'
    if dataset in gp_data.HETEROPHILOUS:
        entry = TABLE2.get(model, {}).get(dataset)
        if entry is None or (quantity == 'bal_acc') != binary:
            return '-'
        what = 'bal. acc.' if binary else 'acc.'
        return f'{entry[0]:.2f} ± {entry[1]:.2f} (L={entry[2]}; {what})'
    return TABLE_SMALL.get((dataset, L), {}).get(model, '-')


def tables(records):
    r"""The tables of the runs ``records``: per dataset, recipe and depth,
    one column per model, the test metric (``table``) and on the binary
    sets of the paper's recipe the test balanced accuracy of the epoch of
    best validation balanced accuracy (``bal_acc``), both in %, mean ± 95%
    CI (n), next to the paper's numbers of the same quantity; the paired
    (same split) differences to GAT (``minus_gat``); the selected epochs
    and mean alpha_vv (``epochs``); the Dirichlet energies (``energy``);
    with the strong recipe the depth chosen on validation (``depth``)."""
    frame = runs_frame(records, RESULTS)
    if frame.empty:
        return [('table', None, pd.DataFrame())]
    binary = frame['dataset'].isin(gp_data.ROC_AUC_DATASETS)
    paper = frame['recipe'] == 'paper'
    result = [
        (
            'table',
            'Test metric (%) at the epoch of best validation metric',
            wide(frame, 'test_metric', 'test'),
        )
    ]
    if (binary & paper).any():
        result.append(
            (
                'bal_acc',
                'Test balanced accuracy (%) at the epoch of best '
                "validation balanced accuracy (the paper's Table 3 "
                'quantity)',
                wide(frame[binary & paper], 'bal_test_bal_acc', 'bal_acc'),
            )
        )
    result += [
        (
            'minus_gat',
            'Test metric minus GAT of the same split (points)',
            minus_gat(frame),
        ),
        (
            'epochs',
            'Selected epoch and mean alpha_vv there',
            epochs_table(frame),
        ),
        (
            'energy',
            'Dirichlet energy of the input and of the output '
            '(mean over the splits)',
            energy_table(frame),
        ),
    ]
    if (frame['recipe'] == 'strong').any():
        result.append(
            (
                'depth',
                'Strong recipe: the depth of best mean validation metric',
                depth_table(frame[frame['recipe'] == 'strong']),
            )
        )
    return result


def wide(frame, column, quantity) -> pd.DataFrame:
    r"""One row per dataset, recipe and depth (in the order of the runs),
    one column per model: :func:`cell` of ``column``; then the paper's
    numbers of ``quantity`` for the models it has them for."""
    models = [m for m in MODELS['strong'] if m in set(frame['model'])]
    out = []
    groups = frame.groupby(['dataset', 'recipe', 'num_layers'], sort=False)
    for (dataset, recipe, L), group in groups:
        by_model = dict(list(group.groupby('model')))
        row = {'dataset': dataset, 'recipe': recipe, 'L': L}
        for m in models:
            g = by_model.get(m)
            row[m] = (
                '-'
                if g is None
                else cell(g[column], int((g['status'] == 'diverged').sum()))
            )
        for m in models:
            row[f'paper {m}'] = paper_cell(dataset, recipe, L, m, quantity)
        out.append(row)
    table = pd.DataFrame(out)
    empty = [
        c for c in table if c.startswith('paper ') and (table[c] == '-').all()
    ]
    return table.drop(columns=empty)


def minus_gat(frame) -> pd.DataFrame:
    out = []
    frame = finished(frame)
    for key, group in frame.groupby(KEYS[:3] + ['edges'], sort=False):
        gat = group[group['model'] == 'GAT']
        base = dict(zip(gat['split'], 100 * gat['test_metric'], strict=True))
        for model, g in group.groupby('model', sort=False):
            if model == 'GAT' or gat.empty:
                continue
            ours = dict(zip(g['split'], 100 * g['test_metric'], strict=True))
            mean, half, n = paired_ci95(ours, base)
            out.append(
                {
                    'dataset': key[0],
                    'recipe': key[1],
                    'L': key[2],
                    'model': model,
                    'minus GAT': difference(mean, half, n),
                }
            )
    return pd.DataFrame(out)


def epochs_table(frame) -> pd.DataFrame:
    out = []
    frame = finished(frame)
    for key, g in frame.groupby(KEYS[:4], sort=False):
        alphas = [a for r in g['alpha_vv_mean'] for a in (r or [])]
        out.append(
            {
                'dataset': key[0],
                'recipe': key[1],
                'L': key[2],
                'model': key[3],
                'n': len(g),
                'median best epoch': float(np.median(g['best_epoch'])),
                'min-max': f'{g["best_epoch"].min()}-{g["best_epoch"].max()}',
                'mean alpha_vv': f'{np.mean(alphas):.2f}' if alphas else '-',
            }
        )
    return pd.DataFrame(out)


def energy_table(frame) -> pd.DataFrame:
    names = {
        'energy_all_input': 'E all pairs (input)',
        'energy_all_output': 'E all pairs (output)',
        'energy_adj_input': 'E adjacent (input)',
        'energy_adj_output': 'E adjacent (output)',
    }
    g = finished(frame).groupby(KEYS[:4], sort=False)[list(names)].mean()
    g = g.map(lambda v: f'{v:.3e}').rename(columns=names).reset_index()
    return g.rename(columns={'num_layers': 'L'})


def diverged(runs) -> int:
    return int((runs['status'] == 'diverged').sum())


def best_depth(runs):
    r"""The depth of ``runs`` (one dataset's and model's, every status)
    whose finished runs have the best mean validation metric, among the
    depths where no run diverged (a depth where training diverges is not
    one to choose), else among all; :obj:`None` if every run diverged."""
    by = runs.assign(gone=runs['status'] == 'diverged').groupby('num_layers')
    stats = by.agg(val=('val_metric', 'mean'), gone=('gone', 'sum'))
    stats = stats[stats['val'].notna()]
    if stats.empty:
        return None
    clean = stats[stats['gone'] == 0]
    return (clean if len(clean) else stats)['val'].idxmax()


def depth_table(frame) -> pd.DataFrame:
    r"""Per dataset and model of the strong recipe's runs ``frame`` (every
    status) the row of :func:`best_depth`."""
    out = []
    for (dataset, model), runs in frame.groupby(
        ['dataset', 'model'], sort=False
    ):
        L = best_depth(runs)
        if L is None:  # every run of the model diverged
            out.append(
                {
                    'dataset': dataset,
                    'model': model,
                    'L': '-',
                    'val (mean)': 'diverged',
                    'test': '-',
                    'paper': '-',
                }
            )
            continue
        g = runs[runs['num_layers'] == L]
        out.append(
            {
                'dataset': dataset,
                'model': model,
                'L': L,
                'val (mean)': f'{100 * g["val_metric"].mean():.2f}',
                'test': cell(g['test_metric'], diverged(g)),
                'paper': paper_cell(dataset, 'strong', L, model, 'test'),
            }
        )
    return pd.DataFrame(out)


def strong_sep(records) -> pd.DataFrame:
    r"""The strong recipe's GAT-sep against GATE-sep on Minesweeper and
    Tolokers: per depth 1-5 the test ROC AUC (%), mean ± 95% CI (n) over
    the splits, or ``no runs yet``, and their paired difference; then per
    dataset the row of the depth of best mean validation metric of each
    model, beside the published numbers at the depth their authors chose:
    Platonov et al.'s GAT-sep (their Table 4, which the GATE paper's Table
    4 repeats) and the GATE paper's GATE-sep (its Table 4)."""
    frame = runs_frame(records, RESULTS)
    if not frame.empty:
        frame = frame[frame['recipe'] == 'strong']
    models = ('GAT-sep', 'GATE-sep')
    published = {
        'GAT-sep': 'Platonov et al. GAT-sep',
        'GATE-sep': 'GATE paper GATE-sep',
    }
    out = []
    for dataset in ('Minesweeper', 'Tolokers'):
        by = {}
        for m in models:
            by[m] = (
                frame[(frame['dataset'] == dataset) & (frame['model'] == m)]
                if not frame.empty
                else frame
            )
        for L in range(1, 6):
            row = {'dataset': dataset, 'L': str(L)}
            splits = {}
            for m in models:
                g = by[m][by[m]['num_layers'] == L] if len(by[m]) else by[m]
                row[m] = (
                    cell(g['test_metric'], diverged(g))
                    if len(g)
                    else 'no runs yet'
                )
                done = finished(g) if len(g) else g
                splits[m] = (
                    dict(
                        zip(
                            done['split'],
                            100 * done['test_metric'],
                            strict=True,
                        )
                    )
                    if len(done)
                    else {}
                )
            mean, half, n = paired_ci95(splits['GATE-sep'], splits['GAT-sep'])
            row['GATE-sep minus GAT-sep'] = (
                difference(mean, half, n) if n else '-'
            )
            for m in models:
                row[published[m]] = '-'
            out.append(row)
        row = {'dataset': dataset, 'L': 'best on validation'}
        for m in models:
            g = by[m]
            if not len(g):
                row[m] = 'no runs yet'
                continue
            L = best_depth(g)
            if L is None:
                row[m] = f'{diverged(g)} diverged'
                continue
            best = g[g['num_layers'] == L]
            row[m] = f'{cell(best["test_metric"], diverged(best))} (L={L})'
        row['GATE-sep minus GAT-sep'] = '-'
        for m in models:
            mean, ci = TABLE_STRONG[m][dataset]
            row[published[m]] = f'{mean:.2f} ± {ci:.2f}'
        out.append(row)
    return pd.DataFrame(out)
