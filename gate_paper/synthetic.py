r"""One run of the synthetic tasks (Sec. 5.1, Tables 1 and 2; Appendix B's
settings), which :mod:`gate_paper.table1` and :mod:`gate_paper.table2`
share: the configuration of a run, its command-line options and its
training."""

import argparse
import functools
import os
import shutil
import tempfile
import time
from typing import Callable, List, Optional

from gate_paper.cli import int_at_least, positive_float
from gate_paper.model_names import (
    SYNTHETIC_MODELS,
    needs_even_hidden,
    odd_hidden_error,
)
from gate_paper.provenance import of_full_batch_run
from gate_paper.runner import (
    add_runner_args,
    load_runs,
    provenance_of_divergence,
    run_all,
)
from gate_paper.store import run_id

MODELS = SYNTHETIC_MODELS
# What a run measures (the results of its run file):
RESULTS = (
    'min_loss_epoch',
    'min_train_loss',
    'test_acc_at_min_loss',
    'train_acc_at_min_loss',
    'first_full_train_epoch',
    'test_acc_at_first_full_train',
    'max_test_acc',
    'max_test_acc_epoch',
    'final_train_acc',
    'final_test_acc',
    'epochs_run',
    'stopped_early',
    'wall_s',
    'final_alpha_vv_mean',
)


def config(dataset, source, model, num_layers, seed, args) -> dict:
    r"""The configuration of one synthetic run: what is trained on what
    (``dataset`` of ``source``), and with which settings (``args``). Its
    run file is named by it."""
    return dict(
        dataset=dataset,
        source=source,
        model=model,
        num_layers=num_layers,
        seed=seed,
        hidden=args.hidden,
        lr=args.lr,
        max_epochs=args.max_epochs,
        stop_loss=args.stop_loss,
    )


def add_training_args(parser: argparse.ArgumentParser, study: str):
    r"""``--models``, Appendix B's settings, ``--out-dir`` (run files,
    default ``runs/<study>``), ``--tables-dir`` and the runner's options."""
    parser.add_argument(
        '--models', nargs='+', default=list(MODELS), choices=MODELS
    )
    parser.add_argument('--hidden', type=int_at_least(1), default=64)
    parser.add_argument('--lr', type=positive_float, default=0.005)
    parser.add_argument('--max-epochs', type=int_at_least(1), default=10000)
    parser.add_argument('--stop-loss', type=positive_float, default=1e-4)
    parser.add_argument(
        '--compile-after',
        type=int_at_least(0),
        default=None,
        metavar='N',
        help='torch.compile the forward of runs still going after N '
        'epochs (default: never)',
    )
    parser.add_argument(
        '--no-plots',
        action='store_true',
        help='no alpha_vv plots (default: per run, in <out-dir>/plots)',
    )
    parser.add_argument(
        '--out-dir',
        default=os.path.join('runs', study),
        help='the folder of the run files (one JSON file per run)',
    )
    parser.add_argument(
        '--tables-dir',
        default=None,
        help='where the tables go (default: --out-dir)',
    )
    add_runner_args(parser)


def check_hidden(parser: argparse.ArgumentParser, args, depths):
    r"""A usage error if ``--hidden`` is odd and a model of ``--models`` of
    one of ``depths`` has hidden units (its looks-linear init mirrors them
    in pairs)."""
    for m in args.models:
        for L in depths:
            if args.hidden % 2 and needs_even_hidden('synthetic', m, L):
                parser.error(odd_hidden_error(args.hidden, m, L))


def run_study(
    args,
    runs: List[dict],
    run_one: Callable,
    prepare: Callable[[str], None],
    **settings,
) -> List[dict]:
    r"""Runs the ``runs`` not yet in ``--out-dir`` (none with
    ``--tables-only``) with ``run_one(settings, config)``: ``prepare(root)``
    first makes every graph once in a temporary ``root``, which
    ``settings['tmp_root']`` names. Returns the records of the finished
    runs, in the order of ``runs``."""
    if not args.tables_only:
        tmp_root = tempfile.mkdtemp(prefix='gate_paper_')
        try:
            prepare(tmp_root)
            settings.update(
                tmp_root=tmp_root,
                plot_dir=None
                if args.no_plots
                else os.path.join(args.out_dir, 'plots'),
                compile_after=args.compile_after,
            )
            run_one = functools.partial(run_one, settings)
            run_all(runs, run_one, args.out_dir, args, fields=RESULTS)
        finally:
            shutil.rmtree(tmp_root, ignore_errors=True)
    return load_runs(args.out_dir, runs, RESULTS)


def in_order(frame, columns, order):
    r"""The rows of ``frame`` whose ``columns`` are a key of ``order``
    (the sweep's runs), in that order, as named tuples."""
    rows = (r for r in frame.itertuples(index=False))
    key = lambda r: tuple(getattr(r, c) for c in columns)  # noqa: E731
    return sorted(
        (r for r in rows if key(r) in order), key=lambda r: order[key(r)]
    )


def train_synthetic(
    config: dict,
    data,
    num_classes: int,
    plot_dir: Optional[str] = None,
    compile_after: Optional[int] = None,
) -> dict:
    r"""Builds the run's model, seeded with its seed, and trains it: Adam
    without weight decay or dropout (Appendix B), selection at the minimum
    training loss, stopping once it falls below ``stop_loss`` (the authors'
    scripts' rule; the paper gives only the epoch budget). The
    values of an epoch come from its training forward pass (before its
    update). Also records the first epoch of 100% training accuracy with
    the test accuracy then, the best test accuracy of any epoch (the
    authors' appendix tables report it) and the alpha_vv history (plotted
    to ``plot_dir``). Returns the results of the run file; raises
    :class:`~gate_paper.training.Diverged` if training diverges.
    """
    import torch

    from gate_paper.metrics import accuracy
    from gate_paper.models import build_model
    from gate_paper.training import Selector, mask_index, train
    from torch_geometric_gate.utils import (
        SelfAttentionRecorder,
        plot_self_attention_histogram,
        plot_self_attention_history,
    )

    c = config
    torch.manual_seed(c['seed'])
    model = build_model(
        'synthetic',
        c['model'],
        data.num_features,
        c['hidden'],
        num_classes,
        c['num_layers'],
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=c['lr'])
    recorder = SelfAttentionRecorder()
    train_index = mask_index(data.train_mask)
    test_index = mask_index(data.test_mask)
    y = data.y

    def measure(out, loss, alphas):
        out = out.detach()
        values = {
            'loss': loss.detach(),
            'train_acc': accuracy(out[train_index], y[train_index]),
            'test_acc': accuracy(out[test_index], y[test_index]),
        }
        for i, alpha in enumerate(alphas):
            values[f'alpha_vv_{i}'] = alpha.detach().mean()
        return values

    min_loss = Selector('loss', 'min', stop_below=c['stop_loss'])
    full = Selector('train_acc', 'first', target=1.0)
    top = Selector('test_acc', 'max')
    last = Selector('loss', 'last')
    facts = of_full_batch_run(
        data.x,
        data.edge_index.size(1) + data.num_nodes,  # with the self-loops
        'GATE' in c['model'],
        compile_after,
    )
    start = time.perf_counter()
    with provenance_of_divergence(facts):
        epochs = train(
            model,
            optimizer,
            data.x,
            data.edge_index,
            y,
            train_index,
            measure,
            [min_loss, full, top, last],
            c['max_epochs'],
            recorder=recorder,
            compile_after=compile_after,
        )
    wall = time.perf_counter() - start
    best, first, high = min_loss.result(), full.result(), top.result()
    final = last.result()['at']

    if plot_dir is not None:
        os.makedirs(plot_dir, exist_ok=True)
        # Named as the run file, by the whole configuration: a second sweep
        # into the same folder keeps the first one's plots and histories.
        stem = os.path.join(plot_dir, run_id(c))
        title = (
            f'{c["model"]}, {c["dataset"]} ({c["source"]}), '
            f'L={c["num_layers"]}, seed {c["seed"]}'
        )
        plot_self_attention_history(
            recorder, stem + '_alpha_history.png', title=title
        )
        plot_self_attention_histogram(
            recorder, stem + '_alpha_final.png', title=title
        )
        torch.save(recorder.state_dict(), stem + '_alpha_history.pt')

    return dict(
        min_loss_epoch=best['epoch'],
        min_train_loss=best['value'],
        test_acc_at_min_loss=best['at']['test_acc'],
        train_acc_at_min_loss=best['at']['train_acc'],
        first_full_train_epoch=first['epoch'],
        test_acc_at_first_full_train=first['at']['test_acc'],
        max_test_acc=high['value'],
        max_test_acc_epoch=high['epoch'],
        final_train_acc=final['train_acc'],
        final_test_acc=final['test_acc'],
        epochs_run=epochs,
        stopped_early=best['stopped'],
        wall_s=wall,
        final_alpha_vv_mean=[
            final[f'alpha_vv_{i}'] for i in range(c['num_layers'])
        ],
        provenance=facts(epochs),
    )


def cell_at(acc: float, epoch: int, mark: str = '') -> str:
    r"""``'<acc %>@<epoch><mark>'``, the paper's cell; ``'diverged'`` for
    NaN."""
    if acc != acc:
        return 'diverged'
    return f'{100 * acc:.1f}@{int(epoch)}{mark}'


def alpha_text(values) -> str:
    if not isinstance(values, list):
        return ''
    return ' '.join(f'{v:.2f}' for v in values)


def int_text(value) -> str:
    r"""An integer column's cell (a float where a diverged run made the
    column NaN); ``''`` for NaN."""
    return '' if value != value else str(int(value))


def percent(value) -> str:
    r"""A share as a percentage with one decimal; ``'diverged'`` for NaN."""
    return 'diverged' if value != value else f'{100 * value:.1f}'
