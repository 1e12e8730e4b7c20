r"""The experiment machinery every example script shares (private; not a
public API): command-line checks, metrics on the device, epoch selectors,
the one epoch loop (:func:`run_epochs`, which every script's training runs
in) and its full-batch training step (:func:`train`), the results CSV and
the task runner with ``--jobs``/``--resume``, and the table writers.

``self_sufficient.py``, ``neighbor_dependent.py``, ``real_graphs.py``,
``ogbn.py``, ``distributed.py`` and ``benchmark/epoch_times.py`` import it.
"""

import argparse
import csv
import math
import multiprocessing
import os
import shlex
import signal
import sys
import time
from dataclasses import asdict, dataclass, fields
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn import FAConv, GATConv, GATv2Conv
from torch_geometric.nn.models import MLP

from torch_geometric_gate._cli import float_in, int_at_least, positive_float
from torch_geometric_gate.nn import GATEConv
from torch_geometric_gate.nn.inits import looks_linear_orthogonal_
from torch_geometric_gate.nn.models import GATE
from torch_geometric_gate.utils import self_loop_attention

__all__ = [
    'float_in',
    'int_at_least',
    'positive_float',
]

# Command line -------------------------------------------------------------


def add_runner_args(parser: argparse.ArgumentParser, gpu: bool = False):
    r"""The options of how a script's runs are executed: ``--jobs``,
    ``--threads``, ``--resume``, ``--tables-only``, ``--compile-after``,
    ``--stop-after``."""
    parser.add_argument(
        '--jobs',
        type=int_at_least(1),
        default=1,
        help='runs in parallel processes (each with --threads threads, '
        'default 1)' + ('; on a GPU they share it' if gpu else ''),
    )
    parser.add_argument('--threads', type=int_at_least(1), default=None)
    parser.add_argument(
        '--resume',
        action='store_true',
        help='keep the runs the results CSV in --out-dir already holds and '
        'run only the missing ones (without it, a folder that holds '
        'results is refused)',
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
    parser.add_argument(
        '--stop-after',
        type=positive_float,
        default=None,
        metavar='MINUTES',
        help='stop after this many minutes of wall time, keeping the '
        'finished runs (--resume goes on): the runs still going then are '
        'dropped (they run in worker processes, one with --jobs 1), for '
        'sessions of limited length, e.g. on a lent GPU',
    )


def check_unique(parser: argparse.ArgumentParser, args, *names: str):
    r"""A usage error (exit 2) if a list option holds a value twice."""
    for name in names:
        values = getattr(args, name)
        if values is None:
            continue
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            parser.error(
                f'argument --{name.replace("_", "-")}: each value once, '
                f'got {" ".join(map(str, twice))} more than once'
            )


def check_writable(parser: argparse.ArgumentParser, flag: str, path: str):
    r"""A usage error (exit 2) unless the file ``path`` can be written (its
    folder is created if missing), checked before any training."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        if os.path.isdir(path):
            raise IsADirectoryError(f'{path!r} is a folder')
        existed = os.path.exists(path)
        with open(path, 'a'):
            pass
        if not existed:
            os.remove(path)
    except OSError as e:
        parser.error(f'argument {flag}: cannot write {path!r} ({e})')


# Metrics on the device ----------------------------------------------------


def roc_auc(score: Tensor, target: Tensor) -> Tensor:
    r"""The area under the ROC curve of ``score`` for ``target == 1``
    against the rest, from the ranks of the scores (tied scores share their
    mean rank), the Mann-Whitney statistic: equal to sklearn's
    ``roc_auc_score``. A float64 scalar on the device of ``score``, with no
    host synchronisation; NaN if ``target`` holds one class only."""
    n = score.numel()
    sorted_score, order = score.detach().sort()
    new = torch.ones(n, dtype=torch.bool, device=score.device)
    new[1:] = sorted_score[1:] != sorted_score[:-1]
    group = new.long().cumsum(0) - 1
    rank = torch.arange(1, n + 1, dtype=torch.float64, device=score.device)
    first = torch.full_like(rank, math.inf).scatter_reduce(
        0, group, rank, 'amin'
    )
    last = torch.zeros_like(rank).scatter_reduce(0, group, rank, 'amax')
    mean_rank = ((first + last) / 2)[group]
    positive = (target[order] == 1).double()
    num_pos = positive.sum()
    num_neg = n - num_pos
    rank_sum = (mean_rank * positive).sum()
    return (rank_sum - num_pos * (num_pos + 1) / 2) / (num_pos * num_neg)


def balanced_accuracy(pred: Tensor, y: Tensor, num_classes: int) -> Tensor:
    r"""The mean recall over the classes present in ``y`` (sklearn's
    ``balanced_accuracy_score``), a float64 scalar on the device."""
    correct = (pred == y).double()
    support = torch.zeros(num_classes, dtype=torch.float64, device=y.device)
    support = support.scatter_add(0, y, torch.ones_like(correct))
    hits = torch.zeros_like(support).scatter_add(0, y, correct)
    return torch.nanmean(hits / support)


def metrics(out: Tensor, y: Tensor, index: Tensor) -> Dict[str, Tensor]:
    r"""Accuracy, balanced accuracy (from the argmax labels; what the
    GATE authors' scripts called AUROC) and, for two classes, the ROC AUC
    from the softmax probability of class 1 (else NaN), of the nodes
    ``index`` (an index tensor: no host synchronisation), as scalars on the
    device."""
    out, y = out.detach().index_select(0, index), y.index_select(0, index)
    pred = out.argmax(dim=-1)
    result = {
        'acc': (pred == y).float().mean(),
        'bal_acc': balanced_accuracy(pred, y, out.size(-1)),
        'roc_auc': torch.full(
            (), math.nan, dtype=torch.float64, device=out.device
        ),
    }
    if out.size(-1) == 2:
        result['roc_auc'] = roc_auc(out.float().softmax(dim=-1)[:, 1], y)
    return result


def as_python(values: Dict[str, Tensor]) -> Dict[str, float]:
    r"""The values of a dict of device scalars, with one synchronisation."""
    if not values:
        return {}
    keys = list(values)
    stacked = torch.stack([values[k].double().reshape(()) for k in keys])
    return dict(zip(keys, stacked.cpu().tolist(), strict=True))


# Selection ----------------------------------------------------------------


class Selector:
    r"""Chooses one epoch of a run, on the device: the first epoch whose
    ``values[key]`` is strictly better (``better='max'`` or ``'min'``) than
    that of every earlier epoch, where the loop has reached it. It keeps all
    ``values`` of that epoch (``at``) and, with ``state_of`` a module, a copy
    of its state then. It stops (freezes) after ``patience`` epochs
    without improvement, or after an epoch whose value is below
    ``stop_below``. ``better='first'`` selects the first epoch whose value
    equals ``target``, ``better='last'`` the last epoch the loop ran.

    Nothing here reads a value back to the host, so that a run on a GPU
    does not wait for it every epoch; :meth:`result` does once.
    """

    def __init__(
        self,
        key: str,
        better: str = 'max',
        patience: Optional[int] = None,
        stop_below: Optional[float] = None,
        state_of: Optional[torch.nn.Module] = None,
        target: float = 1.0,
    ):
        if better not in ('max', 'min', 'first', 'last'):
            raise ValueError("better must be 'max', 'min', 'first' or 'last'")
        self.key, self.better, self.target = key, better, target
        self.patience, self.stop_below = patience, stop_below
        self.state_of = state_of
        self.stops = patience is not None or stop_below is not None
        self._ready = False

    def _start(self, values: Dict[str, Tensor]):
        device = values[self.key].device
        start = math.inf if self.better == 'min' else -math.inf
        self.best = torch.tensor(start, dtype=torch.float64, device=device)
        zero = torch.zeros((), dtype=torch.long, device=device)
        self.epoch, self.bad, self.last = zero, zero, zero
        self.found = torch.zeros((), dtype=torch.bool, device=device)
        self.stopped = self.found
        self.at = {
            k: torch.full_like(v.detach(), math.nan) for k, v in values.items()
        }
        self.state = (
            None
            if self.state_of is None
            else {
                k: v.detach().clone()
                for k, v in self.state_of.state_dict().items()
            }
        )
        self._ready = True

    def update(self, epoch: int, values: Dict[str, Tensor], running: Tensor):
        if not self._ready:
            self._start(values)
        active = running & ~self.stopped
        value = values[self.key].detach().double()
        if self.better == 'max':
            improved = value > self.best
        elif self.better == 'min':
            improved = value < self.best
        elif self.better == 'first':
            improved = ~self.found & (value == self.target)
        else:
            improved = torch.ones_like(active)
        improved = active & improved
        self.found = self.found | improved
        self.best = torch.where(improved, value, self.best)
        self.epoch = torch.where(improved, epoch, self.epoch)
        self.last = torch.where(active, epoch, self.last)
        self.at = {
            k: torch.where(improved, v.detach(), self.at[k])
            for k, v in values.items()
        }
        if self.state is not None:
            for k, v in self.state_of.state_dict().items():
                self.state[k].copy_(torch.where(improved, v, self.state[k]))
        if self.patience is not None:
            self.bad = torch.where(
                active, torch.where(improved, 0, self.bad + 1), self.bad
            )
            self.stopped = self.stopped | (
                active & (self.bad >= self.patience)
            )
        if self.stop_below is not None:
            self.stopped = self.stopped | (active & (value < self.stop_below))

    def result(self) -> dict:
        r"""``epoch`` (1-based; 0: none selected), ``value``, ``stopped``
        (by its rule), ``last`` (the last epoch it saw) and the values
        ``at`` the selected epoch, as Python numbers."""
        if not self._ready:
            return dict(epoch=0, value=math.nan, stopped=False, last=0, at={})
        head = as_python(
            dict(
                epoch=self.epoch,
                value=self.best,
                stopped=self.stopped,
                last=self.last,
            )
        )
        return dict(
            epoch=int(head['epoch']),
            value=head['value'],
            stopped=bool(head['stopped']),
            last=int(head['last']),
            at=as_python(self.at),
        )

    def load_into(self, module: torch.nn.Module):
        r"""Loads the state of the selected epoch into ``module``."""
        module.load_state_dict(self.state)


# The training loop --------------------------------------------------------


def run_epochs(
    step: Callable[[int, Callable[[Dict[str, Tensor]], None]], None],
    selectors: Sequence[Selector],
    max_epochs: int,
    device: torch.device,
    check_every: int = 1,
    pbar=None,
    label: str = '',
) -> int:
    r"""The epoch loop of every example script: ``step(epoch, observe)``
    runs one epoch (full-batch, mini-batch or distributed) and calls
    ``observe(values)`` with the epoch's values (device scalars) where it
    measures them, before its parameter update if a selector keeps the
    model's state. The ``selectors`` see them; the loop ends after
    ``max_epochs`` epochs or once every selector with a stopping rule has
    stopped, which it reads back every ``check_every`` epochs (each
    selector freezes at its own stop, so the results are those of stopping
    at once). ``pbar`` (:mod:`tqdm`) shows the values every 50 epochs.
    Returns the epochs run.
    """
    running = torch.ones((), dtype=torch.bool, device=device)
    stopping = [s for s in selectors if s.stops]
    shown: Dict[str, Tensor] = {}
    epoch = 0

    def observe(values: Dict[str, Tensor]):
        for s in selectors:
            s.update(epoch, values, running)
        shown.update(values)

    for epoch in range(1, max_epochs + 1):
        step(epoch, observe)
        if stopping:
            running = ~torch.stack([s.stopped for s in stopping]).all()
        if epoch % check_every == 0 or epoch == max_epochs:
            if pbar is not None and shown and (epoch % 50 == 0 or epoch == 1):
                pbar.set_postfix(
                    run=label,
                    epoch=epoch,
                    **{k: f'{v:.3g}' for k, v in as_python(shown).items()},
                    refresh=True,
                )
            if stopping and not bool(running):
                break
    return epoch


def train(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    x: Tensor,
    edge_index: Tensor,
    y: Tensor,
    train_index: Tensor,
    measure: Callable[..., Dict[str, Tensor]],
    selectors: Sequence[Selector],
    max_epochs: int,
    separate_eval: bool = False,
    recorder=None,
    compile_after: Optional[int] = None,
    pbar=None,
    label: str = '',
) -> int:
    r"""Full-batch training of ``model`` (``forward_with_self_attention``)
    with the cross-entropy of the nodes ``train_index``, for at most
    ``max_epochs`` epochs or until every selector with a stopping rule has
    stopped. Each epoch, ``measure(out, loss, alphas)`` gives the
    epoch's values (device scalars) that the ``selectors`` see, always of
    the parameters before the epoch's update: from the training forward
    pass, or with ``separate_eval`` (a model with dropout) from an
    evaluation pass of the same parameters, so that dropout does not change
    which epoch is chosen. ``recorder`` records alpha_vv of every training
    forward.

    With ``compile_after=n``, a run still going after ``n`` epochs switches
    to :func:`torch.compile` of the forward pass, compiled afresh whatever
    ran before it in the process. The epochs run in :func:`run_epochs`
    (on a GPU reading the stopping rules back every 25 epochs); returns
    the epochs run.
    """
    forward = model.forward_with_self_attention
    device = x.device
    check_every = 1 if device.type == 'cpu' or recorder is not None else 25
    y_train = y.index_select(0, train_index)

    def step(epoch, observe):
        nonlocal forward
        if compile_after is not None and epoch == compile_after + 1:
            # Forget the graphs of earlier runs in this process: without
            # this, PyG's GATv2Conv.forward hits dynamo's recompile limit
            # after a few runs and then runs eagerly for the rest of them.
            torch._dynamo.reset()
            forward = torch.compile(forward, dynamic=False)
        model.train()
        optimizer.zero_grad()
        out, alphas = forward(x, edge_index)
        loss = F.cross_entropy(out.index_select(0, train_index), y_train)
        if recorder is not None and alphas:
            recorder.record(alphas, epoch)
        if separate_eval:
            model.eval()
            with torch.no_grad():
                out, alphas = forward(x, edge_index)
            model.train()
        observe(measure(out, loss, alphas))
        loss.backward()
        optimizer.step()

    return run_epochs(
        step, selectors, max_epochs, device, check_every, pbar, label
    )


def mask_index(mask: Tensor) -> Tensor:
    r"""The indices of a boolean mask (one synchronisation per run)."""
    return mask.nonzero().view(-1)


# Results CSV --------------------------------------------------------------

# The last column of every row this module writes: a row without it was cut
# short (a crash while appending) and is run again on --resume.
COMPLETE = 'complete'

_PARSE = {
    str: str,
    int: int,
    float: float,
    bool: {'True': True, 'False': False}.__getitem__,
    Tuple[float, ...]: lambda text: tuple(float(v) for v in text.split()),
}


def _cells(result, cls) -> List[str]:
    row = []
    for f in fields(cls):
        value = getattr(result, f.name)
        if f.type == Tuple[float, ...]:
            value = ' '.join(f'{v:.4f}' for v in value)
        row.append(str(value))
    return row + ['1']


def write_csv(results, path: str, cls):
    r"""Writes ``results`` (instances of the dataclass ``cls``) as a CSV in
    one atomic replace; tuples of floats as space-separated values; the
    ``complete`` column closes every row."""
    tmp = path + '.tmp'
    with open(tmp, 'w', newline='') as out:
        writer = csv.writer(out)
        writer.writerow([f.name for f in fields(cls)] + [COMPLETE])
        writer.writerows(_cells(r, cls) for r in results)
    os.replace(tmp, path)


def append_csv(result, path: str, cls):
    r"""Appends one finished run to the CSV ``path`` (written by
    :func:`write_csv`), flushed to disk."""
    with open(path, 'a', newline='') as out:
        csv.writer(out).writerow(_cells(result, cls))
        out.flush()
        os.fsync(out.fileno())


def read_csv(path: str, cls, later_columns: Optional[dict] = None):
    r"""Reads the rows of a results CSV back into instances of ``cls``.

    Returns ``(results, cut)``: ``cut`` is the number of rows cut short (the
    last row without its ``complete`` cell, or with fewer fields: a run
    that was being written when the process died), which are dropped so
    that ``--resume`` runs them again. A row with a cell that does not parse
    or with extra fields raises a :class:`ValueError` naming the file and
    line. ``later_columns`` maps columns that CSVs of an earlier version lack
    to the text that stands for "not recorded". A CSV of an earlier version
    without the ``complete`` column is read by its field count.
    """
    names = [f.name for f in fields(cls)]
    casts = {f.name: _PARSE[f.type] for f in fields(cls)}
    with open(path, newline='') as f:
        lines = list(csv.reader(f))
    if not lines:
        return [], 0
    header, rows = lines[0], lines[1:]
    marked = bool(header) and header[-1] == COMPLETE
    columns = header[:-1] if marked else header
    later = {k: v for k, v in (later_columns or {}).items() if k in names}
    missing = [n for n in names if n not in columns and n not in later]
    if missing or set(columns) - set(names):
        raise ValueError(
            f"'{path}' is not a results CSV of this script version; "
            f'expected the columns {names}, got {columns}'
        )
    results, cut = [], 0
    for number, row in enumerate(rows, start=2):
        if not row:
            continue
        last = number == len(rows) + 1
        complete = len(row) == len(header) and (not marked or row[-1] == '1')
        if not complete and last and len(row) <= len(header):
            cut += 1
            continue
        if len(row) != len(header) or (marked and row[-1] != '1'):
            raise ValueError(
                f"'{path}', line {number}: expected {len(header)} fields "
                f'ending in {COMPLETE}=1, got {len(row)}'
            )
        cells = dict(zip(columns, row, strict=False))
        for name, text in later.items():
            cells.setdefault(name, text)
        try:
            results.append(cls(**{n: casts[n](cells[n]) for n in names}))
        except (ValueError, KeyError) as e:
            raise ValueError(
                f"'{path}', line {number}: a cell does not parse ({e})"
            ) from None
    return results, cut


# The task runner ----------------------------------------------------------


class _Lock:
    r"""``<csv>.lock``, held while an invocation writes a results CSV, so
    that two invocations do not write one folder at once; a lock whose
    process is gone is taken over."""

    def __init__(self, csv_path: str):
        self.path = csv_path + '.lock'
        self.held = False

    def __enter__(self):
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                try:
                    with open(self.path) as f:
                        pid = int(f.read().strip() or 0)
                except (OSError, ValueError):
                    pid = 0
                if pid and _alive(pid):
                    raise SystemExit(
                        f'error: another invocation (process {pid}) is '
                        f"writing this results folder ('{self.path}' "
                        'exists); wait for it to finish or use another '
                        '--out-dir (delete the lock file only if no such '
                        'process runs)'
                    ) from None
                try:  # stale: its process is gone
                    os.remove(self.path)
                except FileNotFoundError:
                    pass
                continue
            with os.fdopen(fd, 'w') as f:
                f.write(str(os.getpid()))
            self.held = True
            return self
        raise SystemExit(f"error: could not take the lock '{self.path}'")

    def __exit__(self, *exc):
        if self.held:
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _init_worker(threads: int):
    # Ctrl-C reaches the whole process group: the main process alone
    # decides, and terminates the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(threads)


def _call(run_one, task):
    return run_one(task, None)


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def run_tasks(
    tasks: List,
    run_one: Callable,
    csv_path: str,
    args: argparse.Namespace,
    result_cls,
    row_key: Optional[Callable] = None,
    later_columns: Optional[dict] = None,
) -> List:
    r"""Runs every task with ``run_one(task, pbar)`` and returns the results
    in the order of ``tasks``, as the options of :func:`add_runner_args`
    say (``jobs``, ``threads``, ``resume``, ``tables_only``).

    Every finished run is appended to the CSV at ``csv_path`` at once. A
    CSV that already holds runs is refused without ``resume``; with it,
    the tasks it holds are not run again (runs of other settings in it are
    kept) and a last row cut short is run again. ``<csv>.lock`` keeps a
    second invocation out of the folder while this one writes.
    With ``jobs > 1``, runs go to that many processes (``spawn``), each
    with ``threads`` threads (default 1). Ctrl-C, SIGTERM or an exception
    in a run stop all of them at once; the finished runs stay in the CSV.
    Runs start row by row of the table (``row_key(task)``, default its
    dataset, source and depth), the longest of a row first. With
    ``stop_after`` (minutes), no run starts after that much wall time and
    the runs still going then are dropped (with ``stop_after`` the runs go
    to worker processes even with ``jobs = 1``).
    ``result_cls`` is the dataclass of the results (with a ``task``
    property).
    """
    if row_key is None:

        def row_key(t):
            return (t.dataset, t.source, t.num_layers)

    exists = os.path.exists(csv_path)
    if args.tables_only:
        if not exists:
            raise SystemExit(
                f"error: --tables-only needs the results CSV '{csv_path}' of "
                'earlier runs; it does not exist (check --out-dir)'
            )
        kept, _ = read_csv(csv_path, result_cls, later_columns)
        done = {r.task: r for r in kept}
        return [done[t] for t in tasks if t in done]

    with _Lock(csv_path):
        kept, cut = (
            read_csv(csv_path, result_cls, later_columns)
            if exists
            else ([], 0)
        )
        if (kept or cut) and not args.resume:
            raise SystemExit(
                f"error: '{csv_path}' already holds {len(kept)} runs; pass "
                '--resume to keep them and run only the missing ones, or '
                'choose a fresh --out-dir'
            )
        if cut:
            print(
                f"'{csv_path}': {cut} row cut short (an interrupted write); "
                'its run starts again',
                file=sys.stderr,
            )
        write_csv(kept, csv_path, result_cls)  # the current layout, whole
        done = {r.task: r for r in kept}
        return _run(tasks, run_one, csv_path, args, result_cls, row_key, done)


def _run(tasks, run_one, csv_path, args, result_cls, row_key, done):
    from tqdm import tqdm

    rows = {}
    for t in tasks:
        rows.setdefault(row_key(t), len(rows))
    todo = sorted(
        (t for t in dict.fromkeys(tasks) if t not in done),
        key=lambda t: (rows[row_key(t)], -t.cost()),
    )
    total = len(set(tasks))

    def finish(result):
        append_csv(result, csv_path, result_cls)
        done[result.task] = result
        pbar.update()

    stop_after = getattr(args, 'stop_after', None)
    deadline = None if stop_after is None else time.time() + 60 * stop_after
    stopped = False

    previous = None
    if multiprocessing.current_process().name == 'MainProcess':
        try:
            previous = signal.signal(signal.SIGTERM, _terminate)
        except ValueError:  # not the main thread
            previous = None
    pool = None
    try:
        with tqdm(
            total=total, initial=total - len(todo), desc='runs', unit='run'
        ) as pbar:
            if args.jobs <= 1 and deadline is None:
                for task in todo:
                    finish(run_one(task, pbar))
            else:  # worker processes, which a deadline can drop
                # One job keeps the threads it would have in this process.
                threads = args.threads or (
                    1 if args.jobs > 1 else torch.get_num_threads()
                )
                pool = multiprocessing.get_context('spawn').Pool(
                    max(args.jobs, 1),
                    initializer=_init_worker,
                    initargs=(threads,),
                )
                call = _partial(_call, run_one)
                results = pool.imap_unordered(call, todo)
                while True:
                    try:
                        result = (
                            results.next()
                            if deadline is None
                            else results.next(max(deadline - time.time(), 0))
                        )
                    except StopIteration:
                        break
                    except multiprocessing.TimeoutError:
                        stopped = True
                        break
                    finish(result)
                    pbar.set_postfix(
                        last=f'{result.dataset} L={result.num_layers} '
                        f'{result.model}: {result.epochs_run} epochs',
                        refresh=True,
                    )
                if not stopped:
                    pool.close()
                    pool.join()
                    pool = None
    except KeyboardInterrupt:
        raise SystemExit(
            f"interrupted; the {len(done)} finished runs are in '{csv_path}' "
            '(--resume goes on from them)'
        ) from None
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if stopped:
        print(
            f'stopped after --stop-after {stop_after:g} minutes: '
            f'{total - len(done)} runs left, {len(done)} in '
            f"'{csv_path}' (--resume goes on from them)",
            file=sys.stderr,
        )
    return [done[t] for t in tasks if t in done]


def _partial(func, *args):
    import functools

    return functools.partial(func, *args)


# Data --------------------------------------------------------------------

HETEROPHILOUS = (
    'Roman-empire',
    'Amazon-ratings',
    'Minesweeper',
    'Tolokers',
    'Questions',
)
SMALL = ('Cora', 'CiteSeer', 'Texas', 'Wisconsin', 'Actor')
DATASETS = HETEROPHILOUS + SMALL
ROC_AUC_DATASETS = ('Minesweeper', 'Tolokers', 'Questions')
MODELS = (
    'MLP',
    'GAT',
    'MLP+GAT',
    'FAGCN',
    'GATE',
    'GATE_S',
    'GAT-sep',
    'GATE-sep',
    'GATv2',
)
# Models of one recipe only (Platonov et al.'s strong recipe: PyG's GATConv
# as GAT and GAT-sep next to GATv2).
STRONG_ONLY = ('GAT-sep', 'GATE-sep', 'GATv2')
SEP_MODELS = ('GAT-sep', 'GATE-sep')
RECIPES = ('paper', 'strong')
ATTENTION_MODELS = ('GAT', 'GATv2', 'MLP+GAT', 'GATE', 'GATE_S', 'GATE-sep')
# The offline copies (``GATE_SHARED_DATA`` overrides, e.g. from a git
# worktree that is not next to ``shared/``).
SHARED_DATA = os.environ.get(
    'GATE_SHARED_DATA',
    os.path.join(
        os.path.dirname(os.path.abspath(__file__)),
        '..',
        '..',
        'shared',
        'data',
    ),
)
# Where each dataset's files live under a data root (the layout of
# ../shared/data).
SUBDIR = {
    'Cora': 'Planetoid',
    'CiteSeer': 'Planetoid',
    'Texas': 'WebKB',
    'Wisconsin': 'WebKB',
    'Actor': 'Actor',
    **{name: 'heterophilous' for name in HETEROPHILOUS},
}

# Data ---------------------------------------------------------------------


def load_dataset(
    name: str, root: str, raw_edges: bool = False, normalize: bool = True
):
    r"""Returns ``(data, num_classes)`` of dataset ``name`` with PyG's own
    class, from ``root`` laid out as ``../shared/data`` (PyG downloads what
    is missing, where the network allows). ``data.train_mask`` etc. are
    ``[num_nodes, num_splits]``. With ``raw_edges=True`` a heterophilous
    graph keeps the edges of its raw file (each edge once, one direction,
    as the authors' scripts used them) instead of PyG's undirected graph.
    Planetoid features are row-normalised (``NormalizeFeatures``) unless
    ``normalize=False``: the input Dirichlet energies of the paper's
    Appendix D (Cora 5.088e5, CiteSeer 3.463e5 over all pairs) are those of
    the normalised features, so the authors used them.
    """
    from torch_geometric.datasets import (
        Actor,
        HeterophilousGraphDataset,
        Planetoid,
        WebKB,
    )

    if name not in DATASETS:
        raise ValueError(
            f'Unknown dataset {name!r}; expected one of {DATASETS}'
        )
    path = os.path.join(root, SUBDIR[name])
    if name in HETEROPHILOUS:
        dataset = HeterophilousGraphDataset(path, name)
    elif name in ('Cora', 'CiteSeer'):
        from torch_geometric.transforms import NormalizeFeatures

        dataset = Planetoid(
            path, name, transform=NormalizeFeatures() if normalize else None
        )
    elif name == 'Actor':
        dataset = Actor(path)
    else:
        dataset = WebKB(path, name)
    data = dataset[0]
    if data.train_mask.dim() == 1:  # Planetoid: one public split
        for key in ('train_mask', 'val_mask', 'test_mask'):
            data[key] = data[key].view(-1, 1)
    if raw_edges and name in HETEROPHILOUS:
        raw = np.load(dataset.raw_paths[0])
        data.edge_index = torch.from_numpy(raw['edges']).t().contiguous()
    return data, dataset.num_classes


def split_masks(
    data, split: int, both_classes: bool = False
) -> Tuple[Tensor, Tensor, Tensor]:
    r"""The train, validation and test masks of split ``split`` (a
    dataset with one split, Planetoid's public one, serves every split
    index). Raises a :class:`ValueError` if the split does not exist or its
    masks overlap, so that no test node is ever trained on, and with
    ``both_classes=True`` (ROC AUC) if the validation or test nodes hold one
    class only.
    """
    num_splits = data.train_mask.size(1)
    if num_splits == 1:
        column = 0
    elif 0 <= split < num_splits:
        column = split
    else:
        raise ValueError(
            f'split {split} does not exist; the dataset has {num_splits} '
            f'splits (0 to {num_splits - 1})'
        )
    train, val, test = (
        data[key][:, column].bool()
        for key in ('train_mask', 'val_mask', 'test_mask')
    )
    for (a, b), name in (
        ((train, test), 'training and test'),
        ((train, val), 'training and validation'),
        ((val, test), 'validation and test'),
    ):
        if bool((a & b).any()):
            raise ValueError(
                f'split {split}: {int((a & b).sum())} nodes are in both the '
                f'{name} masks'
            )
    if not bool(train.any()) or not bool(val.any()) or not bool(test.any()):
        raise ValueError(f'split {split} has an empty mask')
    if both_classes:  # ROC AUC: selection and test need both classes
        for mask, name in ((val, 'validation'), (test, 'test')):
            present = data.y[mask].unique().tolist()
            if len(present) < 2:
                raise ValueError(
                    f'split {split}: the {name} nodes hold only class '
                    f'{present[0]}, so their ROC AUC is undefined; a ROC '
                    f'AUC dataset needs both classes in every {name} mask'
                )
    return train, val, test


# Models ------------------------------------------------------------------

SYNTHETIC_MODELS = ('GAT_S', 'GAT', 'GATE_S', 'GATE')


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


def synthetic_model(
    name, in_channels, hidden_channels, out_channels, num_layers
):
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
    raise ValueError(
        f'Unknown model {name!r}; expected one of {SYNTHETIC_MODELS}'
    )


# Models: the paper's recipe -----------------------------------------------


class PaperMLP(torch.nn.Module):
    r"""PyG's ``MLP`` without bias or normalisation, ReLU, looks-linear
    orthogonal init."""

    def __init__(self, in_channels, hidden, out_channels, num_layers):
        super().__init__()
        self.mlp = MLP(
            in_channels=in_channels,
            hidden_channels=hidden,
            out_channels=out_channels,
            num_layers=num_layers,
            norm=None,
            bias=False,
            dropout=0.0,
        )
        for i, lin in enumerate(self.mlp.lins):
            looks_linear_orthogonal_(lin.weight, _position(i, num_layers))

    def forward_with_self_attention(self, x, edge_index):
        return self.mlp(x), []


class PaperMLPGAT(torch.nn.Module):
    r"""MLP+GAT of Sec. 5.2: ``GATv2Conv`` (slope 0.2) and linear layers
    alternating, a GAT layer first, ReLU between layers, no bias,
    looks-linear init (Xavier-normal attention vectors)."""

    def __init__(self, in_channels, hidden, out_channels, num_layers):
        super().__init__()
        sizes = [in_channels] + [hidden] * (num_layers - 1) + [out_channels]
        self.layers = torch.nn.ModuleList()
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            position = _position(i, num_layers)
            if i % 2 == 0:
                conv = GATv2Conv(a, b, negative_slope=0.2, bias=False)
                looks_linear_orthogonal_(conv.lin_l.weight, position)
                looks_linear_orthogonal_(conv.lin_r.weight, position)
                torch.nn.init.xavier_normal_(conv.att)
                self.layers.append(conv)
            else:
                lin = torch.nn.Linear(a, b, bias=False)
                looks_linear_orthogonal_(lin.weight, position)
                self.layers.append(lin)

    def forward_with_self_attention(self, x, edge_index):
        alphas = []
        for i, layer in enumerate(self.layers):
            if isinstance(layer, GATv2Conv):
                num_nodes = x.size(0)
                x, (ei, alpha) = layer(
                    x, edge_index, return_attention_weights=True
                )
                alphas.append(self_loop_attention(ei, alpha, num_nodes))
            else:
                x = layer(x)
            if i < len(self.layers) - 1:
                x = x.relu()
        return x, alphas


class PaperFAGCN(torch.nn.Module):
    r"""FAGCN: a linear input layer, ``num_layers`` ``FAConv`` layers (no
    self-loops, ``eps`` times the input embedding added in every layer),
    ReLU after every hidden layer (Appendix C), a linear output layer."""

    def __init__(self, in_channels, hidden, out_channels, num_layers, eps):
        super().__init__()
        self.lin_in = torch.nn.Linear(in_channels, hidden)
        self.convs = torch.nn.ModuleList(
            FAConv(hidden, eps=eps, add_self_loops=False)
            for _ in range(num_layers)
        )
        self.lin_out = torch.nn.Linear(hidden, out_channels)

    def forward_with_self_attention(self, x, edge_index):
        x = x0 = self.lin_in(x).relu()
        for conv in self.convs:
            x = conv(x, x0, edge_index).relu()
        return self.lin_out(x), []


class PaperGATE(torch.nn.Module):
    def __init__(self, in_channels, hidden, out_channels, num_layers, share):
        super().__init__()
        self.gate = GATE(
            in_channels,
            hidden,
            num_layers,
            out_channels,
            share_weights=share,
            init='looks_linear',
            bias=False,
        )

    def forward_with_self_attention(self, x, edge_index):
        return self.gate.forward_with_self_attention(x, edge_index)


# Models: the strong recipe ------------------------------------------------


class FeedForward(torch.nn.Sequential):
    def __init__(self, in_channels, hidden, dropout):
        super().__init__(
            torch.nn.Linear(in_channels, hidden),
            torch.nn.Dropout(dropout),
            torch.nn.GELU(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.Dropout(dropout),
        )


class StrongBlock(torch.nn.Module):
    r"""``x + FF(conv(LayerNorm(x)))``; ``kind`` is ``'ff'`` (no graph
    layer), ``'gat'``, ``'gate'``, ``'gate_s'`` or ``'fagcn'``; with
    ``sep`` the feed-forward part sees ``[x, conv(x)]``, the graph layer
    aggregating the neighbours only (GATv2 without self-loops; GATE keeps
    its self-loop, the switch, and sees ``x`` separately as well)."""

    def __init__(self, kind, hidden, heads, dropout, sep=False, eps=0.1):
        super().__init__()
        self.kind, self.sep = kind, sep
        self.norm = torch.nn.LayerNorm(hidden)
        if kind == 'gat1':
            self.conv = GATConv(
                hidden,
                hidden // heads,
                heads=heads,
                add_self_loops=not sep,
            )
        elif kind == 'gat':
            self.conv = GATv2Conv(
                hidden,
                hidden // heads,
                heads=heads,
                negative_slope=0.2,
                add_self_loops=not sep,
            )
        elif kind in ('gate', 'gate_s'):
            self.conv = GATEConv(
                hidden,
                hidden // heads,
                heads=heads,
                share_weights=kind == 'gate_s',
            )
        elif kind == 'fagcn':
            self.conv = FAConv(hidden, eps=eps, add_self_loops=False)
        self.ff = FeedForward(hidden * (2 if sep else 1), hidden, dropout)

    def forward(self, x, x0, edge_index):
        h = self.norm(x)
        alpha = None
        if self.kind in ('gat', 'gat1', 'gate', 'gate_s'):
            agg, (ei, att) = self.conv(
                h, edge_index, return_attention_weights=True
            )
            if not self.sep or self.kind in ('gate', 'gate_s'):
                alpha = self_loop_attention(ei, att, h.size(0))
        elif self.kind == 'fagcn':
            agg = self.conv(h, x0, edge_index)
        else:
            agg = h
        if self.sep:
            agg = torch.cat([h, agg], dim=-1)
        return x + self.ff(agg), alpha


class StrongNet(torch.nn.Module):
    def __init__(
        self,
        kinds,
        in_channels,
        hidden,
        out_channels,
        heads,
        dropout,
        sep,
        eps,
    ):
        super().__init__()
        self.lin_in = torch.nn.Linear(in_channels, hidden)
        self.dropout = torch.nn.Dropout(dropout)
        self.blocks = torch.nn.ModuleList(
            StrongBlock(kind, hidden, heads, dropout, sep, eps)
            for kind in kinds
        )
        self.norm_out = torch.nn.LayerNorm(hidden)
        self.lin_out = torch.nn.Linear(hidden, out_channels)

    def forward_with_self_attention(self, x, edge_index):
        x = x0 = F.gelu(self.dropout(self.lin_in(x)))
        alphas = []
        for block in self.blocks:
            x, alpha = block(x, x0, edge_index)
            if alpha is not None:
                alphas.append(alpha)
        return self.lin_out(self.norm_out(x)), alphas


def real_graph_model(task, in_channels, num_classes):
    r"""The model of ``task`` (its recipe, model name, depth, width)."""
    name, L, hidden = task.model, task.num_layers, task.hidden
    if task.recipe == 'paper':
        if name in STRONG_ONLY:
            raise ValueError(
                f"{name} exists only in the strong recipe ('--recipes strong')"
            )
        if name == 'MLP':
            return PaperMLP(in_channels, hidden, num_classes, L)
        if name == 'GAT':
            return GATv2Net(in_channels, hidden, num_classes, L)
        if name == 'MLP+GAT':
            return PaperMLPGAT(in_channels, hidden, num_classes, L)
        if name == 'FAGCN':
            return PaperFAGCN(in_channels, hidden, num_classes, L, task.eps)
        if name in ('GATE', 'GATE_S'):
            return PaperGATE(
                in_channels, hidden, num_classes, L, name == 'GATE_S'
            )
    elif task.recipe == 'strong':
        if hidden % task.heads != 0:
            raise ValueError(
                f'--hidden ({hidden}) must be divisible by --heads '
                f'({task.heads})'
            )
        kind = {
            'MLP': 'ff',
            'GAT': 'gat1',  # Platonov et al.'s GAT: PyG's GATConv
            'GAT-sep': 'gat1',
            'GATv2': 'gat',
            'FAGCN': 'fagcn',
            'GATE': 'gate',
            'GATE-sep': 'gate',
            'GATE_S': 'gate_s',
        }.get(name)
        if name == 'MLP+GAT':
            kinds = ['gat' if i % 2 == 0 else 'ff' for i in range(L)]
        elif kind is not None:
            kinds = [kind] * L
        else:
            kinds = None
        if kinds is not None:
            return StrongNet(
                kinds,
                in_channels,
                hidden,
                num_classes,
                task.heads,
                task.dropout,
                name in SEP_MODELS,
                task.eps,
            )
    raise ValueError(
        f'Unknown model {name!r} or recipe {task.recipe!r}; expected one '
        f'of {MODELS} and {RECIPES}'
    )


# The synthetic experiments (Sec. 5.1) ------------------------------------


@dataclass(frozen=True)
class Task:
    r"""One training run of a synthetic table: what is trained on what,
    and with which settings. Two runs with equal tasks give the same row,
    so a results CSV can be resumed from (``--resume``).
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
    r"""A finished synthetic run: its task (the first columns of a results
    CSV) and what it measured."""

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


# Columns that synthetic results CSVs of an earlier version lack, and the
# value that stands for "not recorded" in them.
LATER_COLUMNS = {'max_test_acc': 'nan', 'max_test_acc_epoch': '0'}


def add_training_args(parser: argparse.ArgumentParser):
    r"""The options both synthetic scripts share: Appendix C's settings,
    and how the runs are executed (:func:`add_runner_args`)."""
    parser.add_argument('--hidden', type=int_at_least(1), default=64)
    parser.add_argument('--lr', type=positive_float, default=0.005)
    parser.add_argument('--max-epochs', type=int_at_least(1), default=10000)
    parser.add_argument('--stop-loss', type=positive_float, default=1e-4)
    parser.add_argument('--no-plots', action='store_true')
    add_runner_args(parser)


def run_synthetic(tasks, run_one, csv_path, args):
    r""":func:`run_tasks` for the synthetic scripts' results."""
    return run_tasks(
        tasks,
        run_one,
        csv_path,
        args,
        result_cls=RunResult,
        later_columns=LATER_COLUMNS,
    )


def train_task(
    task: Task,
    data,
    num_classes: int,
    plot_dir: Optional[str] = None,
    pbar=None,
    compile_after: Optional[int] = None,
) -> RunResult:
    r"""Builds the task's model, seeded with ``task.seed``, and trains it
    with :func:`train`: Adam without weight decay or dropout, selection at
    the minimum training loss, stopping once it falls below
    ``task.stop_loss`` (Appendix C). The values of an epoch come from its
    training forward pass (before its update). Also records the first
    epoch of 100% training accuracy with the test accuracy then, the best
    test accuracy of any epoch (the authors' appendix tables report it) and
    the alpha_vv history (plotted to ``plot_dir``).
    """
    from torch_geometric_gate.utils import (
        SelfAttentionRecorder,
        plot_self_attention_histogram,
        plot_self_attention_history,
    )

    torch.manual_seed(task.seed)
    model = synthetic_model(
        task.model,
        data.num_features,
        task.hidden,
        num_classes,
        task.num_layers,
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=task.lr)
    recorder = SelfAttentionRecorder()
    train_index = mask_index(data.train_mask)
    test_index = mask_index(data.test_mask)
    y = data.y

    def measure(out, loss, alphas):
        pred = out.detach().argmax(dim=-1)
        values = {
            'loss': loss.detach(),
            'train_acc': (pred[train_index] == y[train_index]).float().mean(),
            'test_acc': (pred[test_index] == y[test_index]).float().mean(),
        }
        for i, alpha in enumerate(alphas):
            values[f'alpha_vv_{i}'] = alpha.detach().mean()
        return values

    min_loss = Selector('loss', 'min', stop_below=task.stop_loss)
    full = Selector('train_acc', 'first', target=1.0)
    top = Selector('test_acc', 'max')
    last = Selector('loss', 'last')
    start = time.perf_counter()
    epochs = train(
        model,
        optimizer,
        data.x,
        data.edge_index,
        y,
        train_index,
        measure,
        [min_loss, full, top, last],
        task.max_epochs,
        recorder=recorder,
        compile_after=compile_after,
        pbar=pbar,
        label=f'{task.dataset} L={task.num_layers} {task.model} s{task.seed}',
    )
    wall = time.perf_counter() - start
    best, first, high = min_loss.result(), full.result(), top.result()
    final = last.result()['at']

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
        final_alpha_vv_mean=tuple(
            final[f'alpha_vv_{i}'] for i in range(task.num_layers)
        ),
    )


# Statistics and tables ----------------------------------------------------


def mean_ci95(values: Sequence[float]) -> Tuple[float, float]:
    r"""Mean and half-width of the two-sided 95% confidence interval of the
    mean with the t-distribution (``n - 1`` degrees of freedom)."""
    from scipy.stats import t

    arr = np.asarray(values, dtype=float)
    if arr.size < 2:
        return float(arr.mean()), float('nan')
    half = t.ppf(0.975, arr.size - 1) * arr.std(ddof=1) / math.sqrt(arr.size)
    return float(arr.mean()), float(half)


def paired_ci95(a: Dict, b: Dict) -> Tuple[float, float, int]:
    r"""Mean and 95% CI half-width of ``a[k] - b[k]`` over the keys both
    hold (the same split paired), and their number."""
    keys = sorted(set(a) & set(b))
    if not keys:
        return math.nan, math.nan, 0
    mean, half = mean_ci95([a[k] - b[k] for k in keys])
    return mean, half, len(keys)


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
    ``tables`` is a list of ``(name, heading, header, rows)``; a table may
    add ``(csv_header, csv_rows)`` for a CSV other than the markdown (e.g.
    numbers instead of formatted text).
    """
    parts = [f'# {title}\n\n{intro}\n']
    for name, heading, header, rows, *csv_table in tables:
        if heading:
            parts.append(f'## {heading}\n')
        parts.append(markdown_table(header, rows))
        csv_header, csv_rows = csv_table[0] if csv_table else (header, rows)
        with open(
            os.path.join(out_dir, f'{stem}_{name}.csv'), 'w', newline=''
        ) as f:
            writer = csv.writer(f)
            writer.writerow(csv_header)
            writer.writerows(csv_rows)
    text = '\n'.join(parts)
    with open(os.path.join(out_dir, f'{stem}.md'), 'w') as f:
        f.write(text)
    return text


def result_fields(result) -> dict:
    return asdict(result)


def elapsed(start: float) -> float:
    return time.perf_counter() - start
