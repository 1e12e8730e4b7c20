r"""Shared code of the paper's synthetic experiments (Sec. 5.1, Appendix C):
the four architectures, the training loop with the paper's stopping rule and
metrics, and the table writers. Used by ``self_sufficient.py`` and
``neighbor_dependent.py``; not a public API.
"""

import argparse
import csv
import math
import multiprocessing
import os
import shlex
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, fields
from typing import Callable, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.nn import GATv2Conv
from tqdm import tqdm

from torch_geometric_gate._cli import int_at_least, positive_float
from torch_geometric_gate.nn.inits import looks_linear_orthogonal_
from torch_geometric_gate.nn.models import GATE
from torch_geometric_gate.utils import (
    SelfAttentionRecorder,
    plot_self_attention_histogram,
    plot_self_attention_history,
    self_loop_attention,
)

MODELS = ('GAT_S', 'GAT', 'GATE_S', 'GATE')


def _position(i: int, num_layers: int) -> str:
    if num_layers == 1:
        return 'only'
    if i == 0:
        return 'first'
    return 'last' if i == num_layers - 1 else 'hidden'


class GATv2Net(torch.nn.Module):
    r"""The paper's GAT / GAT_S baseline: PyG's ``GATv2Conv`` layers with
    LeakyReLU(0.2) in the score, no bias, one head, ReLU between layers, the
    last layer emitting the logits; looks-linear orthogonal ``lin_l`` /
    ``lin_r`` (shared for GAT_S) and a Xavier-normal attention vector.
    """

    def __init__(
        self,
        in_channels,
        hidden_channels,
        out_channels,
        num_layers,
        share_weights=False,
    ):
        super().__init__()
        sizes = [in_channels] + [hidden_channels] * (num_layers - 1)
        sizes += [out_channels]
        self.convs = torch.nn.ModuleList(
            GATv2Conv(
                i,
                o,
                negative_slope=0.2,
                bias=False,
                share_weights=share_weights,
            )
            for i, o in zip(sizes[:-1], sizes[1:], strict=True)
        )
        self.reset_parameters()

    def reset_parameters(self):
        num_layers = len(self.convs)
        for i, conv in enumerate(self.convs):
            conv.reset_parameters()
            for lin in {
                id(conv.lin_l): conv.lin_l,
                id(conv.lin_r): conv.lin_r,
            }.values():
                looks_linear_orthogonal_(lin.weight, _position(i, num_layers))
            torch.nn.init.xavier_normal_(conv.att)

    def forward_with_self_attention(self, x, edge_index):
        alphas = []
        for i, conv in enumerate(self.convs):
            num_nodes = x.size(0)
            x, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
            alphas.append(self_loop_attention(ei, alpha, num_nodes))
            if i < len(self.convs) - 1:
                x = x.relu()
        return x, alphas


def build_model(name, in_channels, hidden_channels, out_channels, num_layers):
    if name in ('GAT', 'GAT_S'):
        return GATv2Net(
            in_channels,
            hidden_channels,
            out_channels,
            num_layers,
            share_weights=name == 'GAT_S',
        )
    if name in ('GATE', 'GATE_S'):
        return GATE(
            in_channels,
            hidden_channels,
            num_layers,
            out_channels,
            share_weights=name == 'GATE_S',
            init='looks_linear',
        )
    raise ValueError(f'Unknown model {name!r}; expected one of {MODELS}')


@dataclass(frozen=True)
class Task:
    r"""One training run of a table: what is trained on what, and with
    which settings. Two runs with equal tasks give the same row, so a
    results CSV can be resumed from (``--resume``).
    """

    dataset: str
    source: str
    model: str
    num_layers: int
    seed: int
    hidden: int
    lr: float
    max_epochs: int
    stop_loss: float

    def cost(self) -> float:
        r"""A rough relative cost, so that the long runs of a table row
        start first: GAT models rarely meet the stopping rule, GATE models
        usually do.
        """
        slow = self.model in ('GAT', 'GAT_S')
        return self.num_layers * (10.0 if slow else 1.0)


@dataclass(frozen=True)
class RunResult(Task):
    r"""A finished run: its task (the first columns of a results CSV) and
    what it measured."""

    min_loss_epoch: int  # 1-based
    min_train_loss: float
    test_acc_at_min_loss: float
    train_acc_at_min_loss: float
    first_full_train_epoch: int  # 1-based; 0: never 100% training accuracy
    test_acc_at_first_full_train: float  # nan if never
    max_test_acc: float  # the best test accuracy of any epoch
    max_test_acc_epoch: int
    final_train_acc: float
    final_test_acc: float
    epochs_run: int
    stopped_early: bool
    wall_s: float
    final_alpha_vv_mean: Tuple[float, ...] = ()

    @property
    def task(self) -> Task:
        return Task(**{f.name: getattr(self, f.name) for f in fields(Task)})


def train_run(
    model: torch.nn.Module,
    data: Data,
    task: Task,
    plot_dir: Optional[str] = None,
    pbar=None,
    compile_after: Optional[int] = None,
) -> RunResult:
    r"""Full-batch Adam without weight decay or dropout, up to
    ``task.max_epochs`` epochs, stopping once the training loss falls below
    ``task.stop_loss`` (Appendix C). The loss, the accuracies and alpha_vv of
    an epoch come from that epoch's training forward pass (before its
    update), so recording them costs no second forward. Returns the paper's
    Table 1 metric: the test accuracy at the epoch of minimum training loss;
    and the first epoch of 100% training accuracy with the test accuracy
    then, and the best test accuracy of any epoch (the authors' appendix
    tables report it).

    With ``compile_after=n``, a run still going after ``n`` epochs switches
    to :func:`torch.compile` of the forward pass (the same function, fused
    kernels; 1.4-1.8x faster per epoch on the CPU), so that short runs do
    not pay the compilation. Each run compiles afresh, whatever ran before
    it in the same process.
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=task.lr)
    recorder = SelfAttentionRecorder()
    best = (math.inf, 0, 0.0, 0.0)
    full = (0, math.nan)  # first epoch of 100% training accuracy, test acc
    top = (-1.0, 0)  # the best test accuracy, its epoch
    train_mask, test_mask, y = data.train_mask, data.test_mask, data.y
    label = f'{task.dataset} L={task.num_layers} {task.model} s{task.seed}'
    forward = model.forward_with_self_attention
    start = time.perf_counter()
    epoch = 0
    for epoch in range(1, task.max_epochs + 1):
        if compile_after is not None and epoch == compile_after + 1:
            # Forget the graphs of earlier runs in this process: without
            # this, PyG's GATv2Conv.forward hits dynamo's recompile limit
            # after a few runs and then runs eagerly for the rest of them.
            torch._dynamo.reset()
            forward = torch.compile(forward, dynamic=False)
        model.train()
        optimizer.zero_grad()
        out, alphas = forward(data.x, data.edge_index)
        loss = F.cross_entropy(out[train_mask], y[train_mask])
        with torch.no_grad():
            pred = out.argmax(dim=-1)
            train_acc = float(
                (pred[train_mask] == y[train_mask]).float().mean()
            )
            test_acc = float((pred[test_mask] == y[test_mask]).float().mean())
        recorder.record(alphas, epoch)
        if full[0] == 0 and train_acc == 1.0:
            full = (epoch, test_acc)
        if test_acc > top[0]:
            top = (test_acc, epoch)
        loss_value = float(loss.detach())
        if loss_value < best[0]:
            best = (loss_value, epoch, test_acc, train_acc)
        if pbar is not None and (epoch % 50 == 0 or epoch == 1):
            pbar.set_postfix(
                run=label,
                epoch=epoch,
                loss=f'{loss_value:.1e}',
                train=f'{train_acc:.3f}',
                refresh=True,
            )
        if loss_value < task.stop_loss:
            break
        loss.backward()
        optimizer.step()
    wall = time.perf_counter() - start

    if plot_dir is not None:
        os.makedirs(plot_dir, exist_ok=True)
        stem = os.path.join(
            plot_dir,
            f'{task.dataset}_{task.source}_L{task.num_layers}_{task.model}'
            f'_seed{task.seed}',
        )
        title = (
            f'{task.model}, {task.dataset} ({task.source}), '
            f'L={task.num_layers}, seed {task.seed}'
        )
        plot_self_attention_history(
            recorder, stem + '_alpha_history.png', title=title
        )
        plot_self_attention_histogram(
            recorder, stem + '_alpha_final.png', title=title
        )
        torch.save(recorder.state_dict(), stem + '_alpha_history.pt')

    return RunResult(
        **asdict(task),
        min_loss_epoch=best[1],
        min_train_loss=best[0],
        test_acc_at_min_loss=best[2],
        train_acc_at_min_loss=best[3],
        first_full_train_epoch=full[0],
        test_acc_at_first_full_train=full[1],
        max_test_acc=top[0],
        max_test_acc_epoch=top[1],
        final_train_acc=train_acc,
        final_test_acc=test_acc,
        epochs_run=epoch,
        stopped_early=loss_value < task.stop_loss,
        wall_s=wall,
        final_alpha_vv_mean=tuple(float(a.detach().mean()) for a in alphas),
    )


def train_task(
    task: Task,
    data: Data,
    num_classes: int,
    plot_dir: Optional[str] = None,
    pbar=None,
    compile_after: Optional[int] = None,
) -> RunResult:
    r"""Builds the task's model, seeded with ``task.seed``, and trains it
    with :func:`train_run`."""
    torch.manual_seed(task.seed)
    model = build_model(
        task.model,
        data.num_features,
        task.hidden,
        num_classes,
        task.num_layers,
    )
    return train_run(model, data, task, plot_dir, pbar, compile_after)


def write_csv(results: List[RunResult], path: str, cls=RunResult):
    r"""Writes ``results`` (instances of the dataclass ``cls``) as a CSV,
    tuples of floats as space-separated values."""
    tuples = [f.name for f in fields(cls) if f.type == Tuple[float, ...]]
    rows = [asdict(r) for r in results]
    for row in rows:
        for name in tuples:
            row[name] = ' '.join(f'{v:.4f}' for v in row[name])
    names = [f.name for f in fields(cls)]
    tmp = path + '.tmp'
    with open(tmp, 'w', newline='') as out:
        writer = csv.DictWriter(out, fieldnames=names)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


# Columns that results CSVs of an earlier version of this script lack, and
# the value that stands for "not recorded" in them.
LATER_COLUMNS = {'max_test_acc': 'nan', 'max_test_acc_epoch': '0'}


# How a CSV cell becomes the value of a field of each type.
_PARSE = {
    str: str,
    int: int,
    float: float,
    bool: lambda text: text == 'True',
    Tuple[float, ...]: lambda text: tuple(float(v) for v in text.split()),
}


def read_csv(path: str, cls=RunResult) -> List[RunResult]:
    r"""Reads the rows :func:`write_csv` wrote back into results (instances
    of the dataclass ``cls``)."""
    casts = {f.name: _PARSE[f.type] for f in fields(cls)}
    with open(path, newline='') as f:
        rows = list(csv.DictReader(f))
    expected = {f.name for f in fields(cls)}
    later = LATER_COLUMNS if cls is RunResult else {}
    for row in rows:  # columns added later: not recorded in older CSVs
        for name, missing in later.items():
            row.setdefault(name, missing)
    if rows and set(rows[0]) != expected:
        raise ValueError(
            f"'{path}' is not a results CSV of this script version; "
            f'expected the columns {sorted(expected)}, got {sorted(rows[0])}'
        )
    return [
        cls(**{k: casts.get(k, str)(v) for k, v in row.items()})
        for row in rows
    ]


def add_training_args(parser: argparse.ArgumentParser):
    r"""The arguments both scripts share: Appendix C's settings, and how
    the runs are executed."""
    parser.add_argument('--hidden', type=int_at_least(1), default=64)
    parser.add_argument('--lr', type=positive_float, default=0.005)
    parser.add_argument('--max-epochs', type=int_at_least(1), default=10000)
    parser.add_argument('--stop-loss', type=positive_float, default=1e-4)
    parser.add_argument('--no-plots', action='store_true')
    parser.add_argument(
        '--jobs',
        type=int_at_least(1),
        default=1,
        help='runs in parallel processes (each with --threads threads, '
        'default 1)',
    )
    parser.add_argument('--threads', type=int_at_least(1), default=None)
    parser.add_argument(
        '--resume',
        action='store_true',
        help='keep the runs the CSV in --out-dir already holds and run '
        'only the missing ones',
    )
    parser.add_argument(
        '--tables-only',
        action='store_true',
        help='run nothing: write the tables from the runs the CSV in '
        '--out-dir holds (for a table that is still being filled)',
    )
    parser.add_argument(
        '--compile-after',
        type=int_at_least(0),
        default=None,
        metavar='N',
        help='torch.compile the forward of runs still going after N '
        'epochs (default: never)',
    )


def _init_worker(threads: int):
    torch.set_num_threads(threads)


def run_tasks(
    tasks: List[Task],
    run_one: Callable,
    csv_path: str,
    args: argparse.Namespace,
    result_cls=RunResult,
    row_key: Optional[Callable] = None,
) -> List[RunResult]:
    r"""Runs every task with ``run_one(task, pbar)`` and returns the results
    in the order of ``tasks``, as the arguments of
    :func:`add_training_args` say (``jobs``, ``threads``, ``resume``,
    ``tables_only``). The CSV at ``csv_path`` is rewritten after
    every finished run; with ``resume=True`` the tasks it already holds are
    not run again (runs of other settings in it are kept as they are).
    With ``jobs > 1``, runs go to that many processes (``spawn``), each
    with ``threads`` threads (default 1). Runs start row by row of the
    table (the order of ``tasks``), the longest of a row first. With
    ``tables_only=True`` nothing runs: the results of the tasks the CSV
    holds are returned. ``result_cls`` is the dataclass of the results
    (with a ``task`` property), ``row_key(task)`` the table row of a task
    (default: its dataset, source and depth).
    """
    if row_key is None:

        def row_key(t):
            return (t.dataset, t.source, t.num_layers)

    jobs, threads = args.jobs, args.threads
    resume, tables_only = args.resume, args.tables_only
    kept: List[RunResult] = []
    if tables_only and not os.path.exists(csv_path):
        raise ValueError(
            f"--tables-only needs the results CSV '{csv_path}' of earlier "
            'runs; it does not exist (check --out-dir)'
        )
    if resume or tables_only:
        kept = (
            read_csv(csv_path, result_cls) if os.path.exists(csv_path) else []
        )
    done = {r.task: r for r in kept}
    if tables_only:
        return [done[t] for t in tasks if t in done]
    # Whole rows first (a table cut short still compares the models on the
    # rows it has), and the longest runs of a row first.
    rows = {}
    for t in tasks:
        rows.setdefault(row_key(t), len(rows))
    todo = sorted(
        (t for t in dict.fromkeys(tasks) if t not in done),
        key=lambda t: (rows[row_key(t)], -t.cost()),
    )
    results = list(kept)

    def finish(result, pbar):
        results.append(result)
        done[result.task] = result
        write_csv(results, csv_path, result_cls)
        pbar.update()

    with tqdm(
        total=len(set(tasks)),
        initial=len(set(tasks)) - len(todo),
        desc='runs',
        unit='run',
    ) as pbar:
        if jobs <= 1:
            for task in todo:
                finish(run_one(task, pbar), pbar)
        else:
            with ProcessPoolExecutor(
                jobs,
                mp_context=multiprocessing.get_context('spawn'),
                initializer=_init_worker,
                initargs=(threads or 1,),
            ) as pool:
                futures = [pool.submit(run_one, task, None) for task in todo]
                for future in as_completed(futures):
                    result = future.result()
                    finish(result, pbar)
                    pbar.set_postfix(
                        last=f'{result.dataset} L={result.num_layers} '
                        f'{result.model} s{result.seed}: '
                        f'{result.epochs_run} epochs',
                        refresh=True,
                    )
    return [done[t] for t in tasks if t in done]


def mean_ci95(values: List[float]):
    r"""Mean and half-width of the two-sided 95% confidence interval of the
    mean with the t-distribution (``n - 1`` degrees of freedom).
    """
    from scipy.stats import t

    arr = np.asarray(values, dtype=float)
    if arr.size < 2:
        return float(arr.mean()), float('nan')
    half = t.ppf(0.975, arr.size - 1) * arr.std(ddof=1) / math.sqrt(arr.size)
    return float(arr.mean()), float(half)


def markdown_table(header: List[str], rows: List[List[str]]) -> str:
    lines = [
        '| ' + ' | '.join(header) + ' |',
        '| ' + ' | '.join('---' for _ in header) + ' |',
    ]
    lines += ['| ' + ' | '.join(row) + ' |' for row in rows]
    return '\n'.join(lines) + '\n'


def run_summary(args, results, total: float) -> str:
    r"""The sentence on how the table's runs were made, for its intro."""
    run_time = sum(r.wall_s for r in results)
    if args.tables_only:
        return (
            f'tables of the {len(results)} finished runs in the results CSV '
            f'(written by `python {shlex.join(sys.argv)}`; the runs took '
            f'{run_time:.0f} s of run time in all)'
        )
    return (
        f'command `python {shlex.join(sys.argv)}`; this invocation took '
        f'{total:.0f} s ({args.jobs} process(es)), the {len(results)} runs '
        f'{run_time:.0f} s of run time in all'
    )


def write_tables(out_dir: str, stem: str, title: str, intro: str, tables):
    r"""Writes ``stem.md`` (the title, the ``intro`` and every table) and,
    per table, ``stem_<name>.csv``, which the documentation includes.
    ``tables`` is a list of ``(name, heading, header, rows)``.
    """
    parts = [f'# {title}\n\n{intro}\n']
    for name, heading, header, rows in tables:
        if heading:
            parts.append(f'## {heading}\n')
        parts.append(markdown_table(header, rows))
        with open(
            os.path.join(out_dir, f'{stem}_{name}.csv'), 'w', newline=''
        ) as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(rows)
    text = '\n'.join(parts)
    with open(os.path.join(out_dir, f'{stem}.md'), 'w') as f:
        f.write(text)
    return text
