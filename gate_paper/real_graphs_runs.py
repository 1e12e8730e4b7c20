r"""The runs of a :mod:`gate_paper.real_graphs` command line: the recipes'
defaults, the configuration of every run (:func:`configs`, the run files'
names) and the usage errors of options that make no run, or runs that
cannot be built (:func:`check_runs`)."""

import argparse

from gate_paper import data as gp_data
from gate_paper.cli import check_heads
from gate_paper.model_names import (
    MODELS,
    STRONG_ONLY,
    needs_even_hidden,
    odd_hidden_error,
)
from gate_paper.paper_numbers import LEARNING_RATES

STRONG_DATASETS = ('Minesweeper', 'Tolokers')
# The recipes' defaults (lr None: the paper's per-dataset table; patience
# None: every epoch runs; depths None: by dataset, see ``depths_of``).
#: FAConv's default epsilon (``--fagcn-eps``).
FAGCN_EPS = 0.3
RECIPE_DEFAULTS = {
    'paper': dict(
        hidden=64,
        heads=1,
        dropout=0.0,
        lr=None,
        epochs=5000,
        patience=100,
        depths=None,
        models=[m for m in MODELS['strong'] if m not in STRONG_ONLY],
    ),
    'strong': dict(
        hidden=512,
        heads=8,
        dropout=0.2,
        lr=3e-5,
        epochs=1000,
        patience=None,
        depths=[1, 2, 3, 4, 5],
        models=['GAT', 'GAT-sep', 'GATv2', 'GATE', 'GATE-sep'],
    ),
}


def learning_rate(dataset, recipe, num_layers, override=None) -> float:
    if override is not None:
        return override
    if RECIPE_DEFAULTS[recipe]['lr'] is not None:
        return RECIPE_DEFAULTS[recipe]['lr']
    shallow, deep = LEARNING_RATES[dataset]
    return shallow if num_layers <= 5 else deep


def depths_of(dataset, recipe, override=None):
    if override:
        return override
    if RECIPE_DEFAULTS[recipe]['depths']:
        return RECIPE_DEFAULTS[recipe]['depths']
    return [5, 10] if dataset in gp_data.HETEROPHILOUS else [2, 5, 10, 20]


def configs(args) -> list:
    r"""The configuration of every run (the run files' names): what
    decides the run, so an option that does not apply to a run (``--heads``
    and ``--dropout`` to the paper's recipe, ``--raw-edges`` to a graph
    that is not a heterophilous set's, ``--fagcn-eps`` to a model other
    than FAGCN, whose ``eps`` stays the default) is not in its
    configuration."""
    runs = []
    for dataset in args.datasets:
        for recipe in args.recipes:
            d = RECIPE_DEFAULTS[recipe]
            if recipe == 'strong' and dataset not in STRONG_DATASETS:
                continue
            patience = d['patience'] and (args.patience or d['patience'])
            normalized = dataset in ('Cora', 'CiteSeer')
            strong = recipe == 'strong'
            heads = (strong and args.heads) or d['heads']
            dropout = d['dropout']
            if strong and args.dropout is not None:
                dropout = args.dropout
            for L in depths_of(dataset, recipe, args.depths):
                for split in args.splits:
                    for model in args.models:
                        if model not in d['models']:
                            continue
                        runs.append(
                            dict(
                                dataset=dataset,
                                recipe=recipe,
                                model=model,
                                num_layers=L,
                                split=split,
                                seed=args.seed + split,
                                edges=gp_data.edges_of(
                                    dataset, args.raw_edges
                                ),
                                features='normalized'
                                if normalized and not args.raw_features
                                else 'raw',
                                hidden=args.hidden or d['hidden'],
                                heads=heads,
                                dropout=dropout,
                                eps=args.fagcn_eps
                                if model == 'FAGCN'
                                else FAGCN_EPS,
                                lr=learning_rate(dataset, recipe, L, args.lr),
                                max_epochs=args.max_epochs or d['epochs'],
                                patience=patience or 0,
                            )
                        )
    return runs


def check_runs(parser: argparse.ArgumentParser, args):
    r"""Usage errors for options that make no run of a model of
    ``--models`` (a model its recipes do not have) or runs whose models
    cannot be built: an odd ``--hidden`` with the paper recipe's looks-linear
    init, a strong recipe's ``--hidden`` that ``--heads`` does not
    divide."""
    runs = configs(args)
    missing = [m for m in args.models if m not in {c['model'] for c in runs}]
    if missing:
        has = '; '.join(
            f"the {r} recipe's: {' '.join(RECIPE_DEFAULTS[r]['models'])}"
            + (
                f' (on {" and ".join(STRONG_DATASETS)} only)'
                if r == 'strong'
                else ''
            )
            for r in args.recipes
        )
        parser.error(
            f'argument --models: no run of {" ".join(missing)} with '
            f'--recipes {" ".join(args.recipes)} and --datasets '
            f'{" ".join(args.datasets)}; the models are {has}'
        )
    for c in runs:
        if c['hidden'] % 2 and needs_even_hidden(
            c['recipe'], c['model'], c['num_layers']
        ):
            parser.error(
                odd_hidden_error(c['hidden'], c['model'], c['num_layers'])
            )
        if c['recipe'] == 'strong':
            check_heads(parser, c['hidden'], c['heads'])
