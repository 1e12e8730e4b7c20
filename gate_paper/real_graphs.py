r"""GATE against GATv2 and the paper's baselines on real graphs (Sec. 5.2,
Table 3, the extended heterophilous Table 4 and Appendix C), on the 10
standard splits with model selection on validation.

Datasets (``--datasets``, PyG's classes under ``--data-root``, downloaded
on first use): the heterophilous
sets of Platonov et al. (PyG's ``HeterophilousGraphDataset``) and the small
sets of Appendix C (``Planetoid`` Cora and CiteSeer, public split, its "10
splits" being 10 model seeds; ``WebKB`` Texas and Wisconsin and ``Actor``,
the 10 Geom-GCN splits).

Recipes (``--recipes``, :func:`gate_paper.models.build_model`):

- ``paper`` (Appendix B): width 64, one head, no bias, ReLU, looks-linear
  orthogonal init (FAGCN: biases and PyTorch's default init in its input
  and output layers), Adam with the paper's per-dataset learning rates, no
  dropout or weight decay, at most 5000 epochs; depths 5 and 10
  (heterophilous) or 2, 5, 10 and 20 (small sets). Ours, not the paper's
  (which gives only the epoch budget): stopping after ``--patience`` (100)
  epochs without a better validation metric.
- ``strong`` (Platonov et al.'s residual setup, the paper's extended
  table): width 512, 8 heads, dropout 0.2, AdamW (lr 3e-5), all 1000
  epochs, depths 1 to 5; Minesweeper and Tolokers only.

Each run reports the test metrics of the epoch of best validation metric
(ROC AUC for Minesweeper, Tolokers and Questions, accuracy for the others)
and, on the binary sets, of the epoch of best validation balanced accuracy
in the same run (the paper's Table 3 "AUROC" is balanced accuracy). One
run file per run in ``--out-dir``; the tables (mean and 95% CI over the
splits, next to the paper's numbers) in ``--tables-dir``.

    python -m gate_paper.real_graphs --quick          # Texas, 12 short runs
    python -m gate_paper.real_graphs --datasets Texas Wisconsin Actor \
        Cora CiteSeer --jobs 2 --resume
    python -m gate_paper.real_graphs --datasets Minesweeper --recipes strong
"""

import argparse
import functools
import os
import time

from gate_paper import data as gp_data
from gate_paper.cli import (
    check_device,
    device_name,
    float_in,
    int_at_least,
    outputs,
    positive_float,
)
from gate_paper.model_names import MODELS
from gate_paper.provenance import of_full_batch_run
from gate_paper.real_graphs_runs import (
    FAGCN_EPS,
    RECIPE_DEFAULTS,
    STRONG_DATASETS,
    check_runs,
    configs,
)
from gate_paper.runner import (
    add_runner_args,
    check_folders,
    check_unique,
    load_runs,
    provenance_of_divergence,
    run_all,
)
from gate_paper.store import run_id
from gate_paper.tables import write_tables

DATASETS = gp_data.DATASETS
RECIPES = ('paper', 'strong')
NUM_SPLITS = 10
# What every run measures (a run file lacking one is not a finished run):
RESULTS = (
    'metric',
    'best_epoch',
    'val_metric',
    'test_metric',
    'test_acc',
    'test_bal_acc',
    'test_roc_auc',
    'epochs_run',
)


def main_metric(dataset: str) -> str:
    return 'roc_auc' if dataset in gp_data.ROC_AUC_DATASETS else 'acc'


# One run ------------------------------------------------------------------


def fit(model, data, c: dict, plot_dir=None, compile_after=None) -> dict:
    r"""Trains ``model`` full-batch on split ``c['split']`` (Adam for the
    paper's recipe, AdamW without weight decay for the strong one; only
    training nodes enter the loss) and returns the test metrics of the
    parameters of best validation metric (and, on the binary sets, of best
    validation balanced accuracy), stopping after ``c['patience']`` epochs
    without improvement of both (0: never). Also the Dirichlet energies of
    the input and the output, and the mean alpha_vv per layer, at the
    selected epoch; with ``plot_dir`` the alpha_vv history and histogram.
    """
    import torch

    from gate_paper.metrics import ROC_AUC_SCORE, metrics
    from gate_paper.training import Selector, mask_index, train
    from torch_geometric_gate.utils import (
        SelfAttentionRecorder,
        dirichlet_energy,
        plot_self_attention_histogram,
        plot_self_attention_history,
    )

    metric = main_metric(c['dataset'])
    binary = metric == 'roc_auc'
    masks = gp_data.split_masks(data, c['split'], binary)
    train_i, val_i, test_i = map(mask_index, masks)
    x, edge_index, y = data.x, data.edge_index, data.y
    if c['recipe'] == 'paper':
        optimizer = torch.optim.Adam(model.parameters(), lr=c['lr'])
    else:
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=c['lr'], weight_decay=0.0
        )
    patience = c['patience'] or None

    def measure(out, loss, alphas):
        on_val = metrics(out, y, val_i)
        return {
            'loss': loss.detach(),
            'val': on_val[metric],
            'val_bal_acc': on_val['bal_acc'],
        }

    selectors = [Selector('val', 'max', patience, state_of=model)]
    if binary:
        selectors.append(
            Selector('val_bal_acc', 'max', patience, state_of=model)
        )
    recorder = None if plot_dir is None else SelfAttentionRecorder(False)
    label = (
        f'{c["dataset"]} {c["recipe"]} L={c["num_layers"]} {c["model"]} '
        f'split {c["split"]}'
    )
    facts = of_full_batch_run(
        x, edge_index.size(1) + x.size(0), 'GATE' in c['model'], compile_after
    )
    start = time.perf_counter()
    # The epochs trained: until every selector has stopped (on the binary
    # sets the balanced-accuracy one may stop after the main one).
    with provenance_of_divergence(facts):
        epochs = train(
            model,
            optimizer,
            x,
            edge_index,
            y,
            train_i,
            measure,
            selectors,
            c['max_epochs'],
            separate_eval=c['dropout'] > 0,
            recorder=recorder,
            compile_after=compile_after,
            label=label,
        )
    wall = time.perf_counter() - start
    main = selectors[0].result()

    def evaluate(selector):
        selector.load_into(model)
        model.eval()
        with torch.no_grad():
            out, alphas = model.forward_with_self_attention(x, edge_index)
        on_test = {k: float(v) for k, v in metrics(out, y, test_i).items()}
        return out, alphas, on_test

    extra = {}
    if binary:
        bal = selectors[1].result()
        _, _, on_test = evaluate(selectors[1])
        extra = dict(
            bal_best_epoch=bal['epoch'],
            bal_val=bal['value'],
            bal_test_bal_acc=on_test['bal_acc'],
            bal_test_roc_auc=on_test['roc_auc'],
            bal_test_acc=on_test['acc'],
        )
    out, alphas, on_test = evaluate(selectors[0])
    # Dirichlet energy (Appendix C) of the input and of the output, over
    # all node pairs and over adjacent pairs.
    energies = [
        float(dirichlet_energy(h.double(), ei))
        for h in (x, out)
        for ei in (None, edge_index)
    ]
    if recorder is not None and len(recorder) > 0:
        os.makedirs(plot_dir, exist_ok=True)
        # Named as the run file, by the whole configuration: a second sweep
        # into the same folder keeps the first one's plots.
        stem = os.path.join(plot_dir, run_id(c))
        title = (
            f'{c["model"]} ({c["recipe"]}), {c["dataset"]}, '
            f'L={c["num_layers"]}, split {c["split"]}'
        )
        plot_self_attention_history(
            recorder, stem + '_alpha_history.png', title=title
        )
        plot_self_attention_histogram(
            [a.cpu() for a in alphas],
            stem + '_alpha_best.png',
            title=title + f', epoch {main["epoch"]}',
        )
    return dict(
        metric=metric,
        best_epoch=main['epoch'],
        val_metric=main['value'],
        test_metric=on_test[metric],
        test_acc=on_test['acc'],
        test_bal_acc=on_test['bal_acc'],
        test_roc_auc=on_test['roc_auc'],
        train_metric=float(metrics(out, y, train_i)[metric]),
        epochs_run=epochs,
        stopped_early=main['stopped'],
        wall_s=wall,
        s_per_epoch=wall / max(epochs, 1),
        energy_all_input=energies[0],
        energy_adj_input=energies[1],
        energy_all_output=energies[2],
        energy_adj_output=energies[3],
        alpha_vv_mean=[float(a.float().mean()) for a in alphas],
        **extra,
        # Which score the ROC AUC ranks (it changed once):
        provenance={
            **facts(epochs),
            **({'roc_auc_score': ROC_AUC_SCORE} if binary else {}),
        },
    )


def prepare(settings: dict, c: dict):
    r"""The graph and the freshly seeded model of run ``c``, on the device
    of ``settings``."""
    import torch

    from gate_paper.models import build_model

    data, num_classes = gp_data.load_dataset(
        c['dataset'],
        settings['root'],
        c['edges'] == 'raw',
        c['features'] == 'normalized',
    )
    torch.manual_seed(c['seed'])
    model = build_model(
        c['recipe'],
        c['model'],
        data.num_features,
        c['hidden'],
        num_classes,
        c['num_layers'],
        heads=c['heads'],
        dropout=c['dropout'],
        eps=c['eps'],
    )
    device = torch.device(settings['device'])
    return data.to(device), model.to(device)


def run_one(settings: dict, c: dict) -> dict:
    r"""One run (in a worker process with ``--jobs``)."""
    data, model = prepare(settings, c)
    plots = c['split'] in settings['plot_splits']
    plot_dir = settings['plot_dir'] if plots else None
    return fit(model, data, c, plot_dir, settings['compile_after'])


# Command line -------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument(
        '--quick',
        action='store_true',
        help='Texas (or --datasets), depth 2, splits 0 1, 30 epochs, width '
        '16: checks the pipeline in about a minute',
    )
    parser.add_argument('--datasets', nargs='+', choices=DATASETS)
    parser.add_argument('--models', nargs='+', choices=MODELS['strong'])
    parser.add_argument(
        '--depths',
        nargs='+',
        type=int_at_least(1),
        help='default: 5 10 (paper, heterophilous), 2 5 10 20 (paper, '
        'small sets), 1 2 3 4 5 (strong)',
    )
    parser.add_argument(
        '--recipes',
        nargs='+',
        choices=RECIPES,
        default=['paper'],
        help="default: paper; 'strong' runs on Minesweeper and Tolokers",
    )
    parser.add_argument(
        '--splits',
        nargs='+',
        type=int_at_least(0),
        default=None,
        help=f'split indices (default: all {NUM_SPLITS}, 0-9)',
    )
    parser.add_argument(
        '--seed',
        type=int_at_least(0),
        default=0,
        help='split i initialises its model with seed SEED + i',
    )
    parser.add_argument(
        '--raw-edges',
        action='store_true',
        help="heterophilous sets: the raw file's edges, one direction "
        "each, as the authors' scripts used them (default: PyG's "
        'undirected graph)',
    )
    parser.add_argument(
        '--raw-features',
        action='store_true',
        help='Cora, CiteSeer: the binary features (default: row-normalised, '
        "as the paper's Dirichlet energies show the authors used)",
    )
    parser.add_argument(
        '--hidden',
        type=int_at_least(1),
        help='default: 64 (paper), 512 (strong)',
    )
    parser.add_argument(
        '--heads', type=int_at_least(1), help='strong recipe only (default 8)'
    )
    parser.add_argument(
        '--dropout',
        type=float_in(0.0, 1.0),
        help='strong recipe only (default 0.2)',
    )
    parser.add_argument(
        '--lr',
        type=positive_float,
        help="default: the paper's per-dataset table (paper), 3e-5 (strong)",
    )
    parser.add_argument(
        '--max-epochs',
        type=int_at_least(1),
        help='default: 5000 (paper), 1000 (strong, all of them run)',
    )
    parser.add_argument(
        '--patience',
        type=int_at_least(1),
        help='paper recipe only: stop after this many epochs without a '
        'better validation metric (default 100)',
    )
    parser.add_argument(
        '--fagcn-eps',
        type=float_in(0.0, 1.0),
        default=FAGCN_EPS,
        help=f"FAConv's epsilon of FAGCN's runs (default {FAGCN_EPS})",
    )
    parser.add_argument(
        '--device',
        type=device_name,
        default='auto',
        help="'cpu', 'cuda', 'cuda:1', ... (default: cuda if available)",
    )
    parser.add_argument(
        '--compile-after',
        type=int_at_least(0),
        metavar='N',
        help='torch.compile the forward of runs still going after N '
        'epochs (default: never)',
    )
    parser.add_argument(
        '--data-root',
        default=gp_data.default_root(),
        help="the data root of PyG's datasets (Planetoid/, WebKB/, Actor/, "
        'heterophilous/), downloaded there if missing (default: '
        f'${gp_data.DATA_ROOT_ENV} or data)',
    )
    parser.add_argument(
        '--out-dir',
        default=os.path.join('runs', 'real_graphs'),
        help='the folder of the run files (one JSON file per run)',
    )
    parser.add_argument(
        '--tables-dir', help='where the tables go (default: --out-dir)'
    )
    parser.add_argument('--no-plots', action='store_true')
    parser.add_argument(
        '--plot-splits',
        nargs='+',
        type=int_at_least(0),
        default=[0],
        help='splits whose runs record alpha_vv every epoch and plot it to '
        '<out-dir>/plots (default: 0)',
    )
    add_runner_args(parser)
    args = parser.parse_args(argv)
    check_unique(
        parser, args, 'datasets', 'models', 'depths', 'recipes', 'splits'
    )
    if args.quick:
        args.datasets = args.datasets or ['Texas']
        args.depths = args.depths or [2]
        args.splits = args.splits if args.splits is not None else [0, 1]
        args.max_epochs = args.max_epochs or 30
        args.hidden = args.hidden or 16
        if 'strong' in args.recipes:
            args.heads = args.heads or 2
    args.datasets = args.datasets or ['Texas']
    args.models = args.models or list(
        dict.fromkeys(
            m for r in args.recipes for m in RECIPE_DEFAULTS[r]['models']
        )
    )
    if args.splits is None:
        args.splits = list(range(NUM_SPLITS))
    for flag in ('splits', 'plot_splits'):
        bad = [s for s in getattr(args, flag) if s >= NUM_SPLITS]
        if bad:
            parser.error(
                f'argument --{flag.replace("_", "-")}: expected split '
                f'indices 0 to {NUM_SPLITS - 1}, got {bad[0]}'
            )
    if 'strong' not in args.recipes:
        for flag in ('heads', 'dropout'):
            if getattr(args, flag) is not None:
                parser.error(
                    f'argument --{flag}: applies to the strong recipe only '
                    "(the paper's recipe has one head and no dropout); "
                    'add --recipes strong'
                )
    if 'paper' not in args.recipes and args.patience is not None:
        parser.error(
            'argument --patience: applies to the paper recipe only (the '
            'strong recipe runs every epoch)'
        )
    if args.recipes == ['strong'] and not set(args.datasets) & set(
        STRONG_DATASETS
    ):
        parser.error(
            'argument --recipes: the strong recipe runs on '
            f'{" and ".join(STRONG_DATASETS)} only'
        )
    check_runs(parser, args)
    if not args.tables_only:  # before any folder is created
        check_device(parser, args.device)
        try:
            gp_data.fetch(args.datasets, args.data_root)
        except FileNotFoundError as e:
            parser.error(f'argument --data-root: {e}')
    check_folders(parser, args)
    if args.device == 'auto':
        import torch

        args.device = 'cuda' if torch.cuda.is_available() else 'cpu'
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    runs = configs(args)
    if not args.tables_only:
        for dataset in args.datasets:  # process each once, check splits
            data, _ = gp_data.load_dataset(
                dataset, args.data_root, args.raw_edges, not args.raw_features
            )
            for split in args.splits:
                gp_data.split_masks(
                    data, split, main_metric(dataset) == 'roc_auc'
                )
        settings = {
            'root': args.data_root,
            'device': args.device,
            'plot_dir': None
            if args.no_plots
            else os.path.join(args.out_dir, 'plots'),
            'plot_splits': set(args.plot_splits),
            'compile_after': args.compile_after,
        }
        run_all(
            runs,
            functools.partial(run_one, settings),
            args.out_dir,
            args,
            fields=RESULTS,
        )
    records = load_runs(args.out_dir, runs, RESULTS)
    print(write(records, args.tables_dir))
    print(outputs(args, 'real_graphs'))


def write(records, folder) -> str:
    from gate_paper.metrics import ROC_AUC_SCORE
    from gate_paper.real_graphs_tables import tables

    binary = [
        r
        for r in records
        if r['config']['dataset'] in gp_data.ROC_AUC_DATASETS
        and r['status'] == 'finished'
    ]
    earlier = sum(
        'roc_auc_score' not in (r.get('provenance') or {}) for r in binary
    )
    scores = []
    if len(binary) > earlier:
        scores.append(
            f'in {len(binary) - earlier} runs the {ROC_AUC_SCORE} of '
            'classes 1 and 0'
        )
    if earlier:
        scores.append(
            f'in {earlier} runs (written before runs recorded it) the '
            'float32 probability of class 1'
        )
    intro = (
        f'{len(records)} runs. Test metric (%) of the epoch with the best '
        'validation metric (ROC AUC on Minesweeper, Tolokers and Questions, '
        'accuracy otherwise), mean ± 95% CI over the splits (n).'
        + (f" The ROC AUC's score: {'; '.join(scores)}." if scores else '')
        + " The paper's Table 3 numbers for the ROC AUC sets are balanced "
        'accuracy of the epoch of best validation balanced accuracy '
        '(`bal_acc`).\n'
    )
    return write_tables(
        folder,
        'real_graphs',
        'Real graphs: GATE against GAT and baselines',
        intro,
        tables(records),
    )


if __name__ == '__main__':
    main()
