r"""The runner: runs a study's runs, each into its run file
(:mod:`gate_paper.store`), in this process or in ``--jobs`` worker
processes.

- A run already in the folder (its file exists and parses) is skipped with
  ``--resume``; without it, the invocation is refused before it runs
  anything. A cut or unparsable file is run again, with a warning naming it.
- Each run's file is written by the process that ran it the moment it
  finishes, so an interruption loses no finished run, and invocations on
  one folder keep each other's runs (no lock: different runs, different
  files).
- A run that raises :class:`~gate_paper.training.Diverged` is recorded as
  diverged, with a warning, and the sweep goes on.
- Ctrl-C or SIGTERM stops every worker at once: SIGTERM raises
  :class:`Terminated`, which no ``except Exception`` (a compiler's
  fallback, say) can swallow; a worker that dies (the OOM killer's
  SIGKILL) is reported, and the invocation ends with an error that says
  how many runs finished. Workers end with the process that started them,
  even if it is killed with SIGKILL (Linux: ``PR_SET_PDEATHSIG``).
- Each run file records the run's provenance
  (:mod:`gate_paper.provenance`).
"""

import argparse
import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Callable, List, Optional

from gate_paper import provenance, store
from gate_paper.cli import int_at_least

# Set in each worker process by its initializer: the threads of a run.
_THREADS = None


class Diverged(RuntimeError):
    r"""Raised by a run that diverged (a NaN or infinite loss or
    attention) at ``epoch``: the runner records the run as diverged (NaN
    metrics) and goes on. :func:`gate_paper.training.train` raises it."""

    def __init__(self, epoch: int, why: str):
        super().__init__(f'diverged at epoch {epoch}: {why}')
        self.epoch = epoch
        #: What the run knows of itself (:func:`provenance_of_divergence`).
        self.provenance: Optional[dict] = None


@contextlib.contextmanager
def provenance_of_divergence(facts: Callable[[int], dict]):
    r"""Gives a :class:`Diverged` raised inside the run's provenance,
    ``facts(epoch)`` (:func:`gate_paper.provenance.of_run` for the epochs
    run): a diverged run's file says where and how it ran as a finished
    one's does."""
    try:
        yield
    except Diverged as e:
        e.provenance = facts(e.epoch)
        raise


def add_runner_args(parser: argparse.ArgumentParser):
    r"""``--jobs``, ``--threads``,
    ``--resume`` and ``--tables-only``."""
    parser.add_argument(
        '--jobs',
        type=int_at_least(1),
        default=1,
        help='runs in parallel worker processes (at most one per run), '
        'each with --threads threads (default 1)',
    )
    parser.add_argument('--threads', type=int_at_least(1), default=None)
    parser.add_argument(
        '--resume',
        action='store_true',
        help='keep the runs whose files --out-dir already holds and run '
        'the others (without it, a folder holding runs of this sweep is '
        'refused)',
    )
    parser.add_argument(
        '--tables-only',
        action='store_true',
        help='run nothing: write the tables from the run files in --out-dir '
        'of the runs these options make',
    )


def check_out_dir(parser: argparse.ArgumentParser, path: str, flag: str):
    r"""A usage error (exit 2) unless ``path`` is a folder this process can
    write run files into; creates it if missing."""
    if os.path.exists(path) and not os.path.isdir(path):
        parser.error(f'argument {flag}: {path!r} is a file, not a folder')
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = _probe(path)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        parser.error(f'argument {flag}: cannot write into {path!r} ({e})')


def check_folders(parser: argparse.ArgumentParser, args):
    r"""``--out-dir`` and ``--tables-dir`` (default: ``--out-dir``) are
    folders this process can write, or a usage error (exit 2)."""
    check_out_dir(parser, args.out_dir, '--out-dir')
    args.tables_dir = args.tables_dir or args.out_dir
    check_out_dir(parser, args.tables_dir, '--tables-dir')


def _probe(path):
    import tempfile

    return tempfile.mkstemp(dir=path, prefix='.probe-')


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


_PR_SET_PDEATHSIG = 1


def end_with_parent(parent: int):
    r"""Makes this process receive SIGKILL when its parent ends (Linux's
    ``prctl(PR_SET_PDEATHSIG)``; elsewhere a thread that polls the parent
    id), and ends it now if ``parent`` has already gone."""
    libc = None
    if sys.platform.startswith('linux'):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
        except OSError:
            libc = None
    if libc is not None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    else:
        import threading

        def watch():
            while os.getppid() == parent:
                time.sleep(1)
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent:  # it died before the line above
        os.kill(os.getpid(), signal.SIGKILL)


def _init_worker(threads: int, parent: int):
    # Ctrl-C reaches the whole process group: the main process alone
    # decides, and ends the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    end_with_parent(parent)
    global _THREADS
    _THREADS = threads


def execute(run: Callable, config: dict, folder: str) -> dict:
    r"""Runs ``run(config)`` (a dict of results; a ``'provenance'`` dict in
    it, if any, goes to the run file's provenance) and writes its run file
    with the provenance; returns the record. A :class:`Diverged` run is
    recorded as diverged."""
    if _THREADS is not None:  # in a worker
        # Imported here, not left to the run: a worker's first run would
        # otherwise run on torch's default threads (the cores), not these.
        import torch

        torch.set_num_threads(_THREADS)
    provenance.reset_peak_memory()  # (a worker runs run after run)
    start = time.perf_counter()
    try:
        result, status, message = dict(run(config)), 'finished', None
    except Diverged as e:
        result = {'provenance': e.provenance}
        status, message = 'diverged', str(e)
    wall = time.perf_counter() - start
    torch = sys.modules.get('torch')
    facts = result.pop('provenance', None) or {}
    record = {
        'config': store.canonical(config),
        'status': status,
        'result': result,
        **({} if message is None else {'message': message}),
        'provenance': {
            **provenance.environment(),
            'threads': None if torch is None else torch.get_num_threads(),
            **facts,
            'wall_s': wall,
        },
    }
    store.save(folder, config, result, status, message, record['provenance'])
    return record


class Terminated(BaseException):
    r"""SIGTERM, raised in the main process. A :class:`BaseException`,
    as :class:`KeyboardInterrupt` is, so that code catching
    :class:`Exception` (a compiler's fallback) cannot swallow it."""


def _on_sigterm(signum, frame):
    raise Terminated


def run_all(
    configs: List[dict],
    run: Callable[[dict], dict],
    folder: str,
    args: argparse.Namespace,
    label: Optional[Callable[[dict], str]] = None,
    fields=(),
) -> List[dict]:
    r"""Runs every configuration of ``configs`` not yet finished in
    ``folder`` with ``run`` (a picklable callable: a module-level function
    or a :func:`functools.partial` of one, taking the configuration and
    returning a dict of results) as ``args`` say (``jobs``, ``threads``,
    ``resume``, ``tables_only``), and returns the records of the finished
    runs in the order of ``configs``. A run file that lacks a result named
    in ``fields`` (another version's file) counts as not finished.

    Raises :class:`SystemExit` with a message (exit code 1) if a worker
    died or the invocation was interrupted (130 for Ctrl-C, 143 for
    SIGTERM), after ending every worker; the finished runs stay in their
    files.
    """
    configs = [store.canonical(c) for c in configs]
    unique = list({store.run_id(c): c for c in configs}.items())
    if args.tables_only:
        return store.load(folder, configs, fields)
    os.makedirs(folder, exist_ok=True)
    records, bad = store.scan(folder, fields)
    done = {k for k, c in unique if k in records and records[k]['config'] == c}
    if done and not args.resume:
        raise SystemExit(
            f"error: '{folder}' already holds {len(done)} of the "
            f'{len(unique)} runs of this sweep; pass --resume to keep them '
            'and run the others, or choose a fresh --out-dir'
        )
    todo = [c for k, c in unique if k not in done]
    for path in bad:
        print(f"'{path}' is refused; its run goes again", file=sys.stderr)
    label = label or store.run_id
    from tqdm import tqdm

    pbar = tqdm(total=len(unique), initial=len(done), desc='runs', unit='run')
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: SIGTERM stays as it is
        previous = None
    finished = 0
    try:
        if args.jobs == 1:
            if args.threads is not None:  # the runs are in this process
                import torch

                torch.set_num_threads(args.threads)
            for config in todo:
                _report(execute(run, config, folder), label, pbar)
                finished += 1
        else:
            finished = _pool(todo, run, folder, args, label, pbar)
    except (KeyboardInterrupt, Terminated) as e:
        code = 130 if isinstance(e, KeyboardInterrupt) else 143
        finished = len(store.load(folder, [c for _, c in unique], fields))
        print(
            f'\ninterrupted: {finished} of the {len(unique)} '
            f"runs are finished in '{folder}' (--resume goes on from them)",
            file=sys.stderr,
        )
        raise SystemExit(code) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        pbar.close()
    return store.load(folder, configs, fields)


def load_runs(folder: str, configs: List[dict], fields=()) -> List[dict]:
    r"""The records of the finished runs of ``configs`` in ``folder``
    (as :func:`gate_paper.store.load`, one scan), for the tables; a
    warning if the folder holds run files that ``configs`` do not make
    (runs of other options, e.g. a ``--tables-only`` without the options
    that made them), which the tables leave out."""
    records, _ = store.scan(folder, fields)
    ids = {store.run_id(c) for c in configs}
    other = len(records.keys() - ids)
    found = store.pick(records, configs)
    if other:
        warnings.warn(
            f"'{folder}' holds {other} run files that these options do not "
            f'make; the tables leave them out and show the '
            f'{len({store.run_id(r["config"]) for r in found})} of the '
            f'{len(ids)} runs of these options (give the options that made '
            'the runs)'
        )
    return found


def _report(record, label, pbar):
    if record['status'] == 'diverged':
        warnings.warn(
            f'run {label(record["config"])} {record["message"]}; recorded '
            'as diverged (NaN metrics), the sweep goes on'
        )
    pbar.update()


def _pool(todo, run, folder, args, label, pbar) -> int:
    workers = min(args.jobs, len(todo))
    if workers == 0:
        return 0
    pool = ProcessPoolExecutor(
        workers,
        mp_context=get_context('spawn'),
        initializer=_init_worker,
        initargs=(args.threads or 1, os.getpid()),
    )
    finished, pending, done = 0, set(), False
    try:
        pending = {pool.submit(execute, run, c, folder) for c in todo}
        while pending:
            ready, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in ready:
                _report(future.result(), label, pbar)
                finished += 1
        done = True
    except BrokenProcessPool:
        raise SystemExit(
            '\nerror: a worker process died (killed by a signal, e.g. the '
            f"OOM killer's SIGKILL): {len(todo) - finished} runs did not "
            f'finish; the {finished} that finished in this invocation are '
            f"in '{folder}' (--resume runs the others; fewer --jobs need "
            'less memory)'
        ) from None
    finally:
        # Idle workers exit by themselves (their exit handlers release what
        # they hold); after an error or a signal, running ones are stopped.
        if not done:
            for process in list(getattr(pool, '_processes', {}).values()):
                process.terminate()  # no-op for a dead one
        pool.shutdown(wait=True, cancel_futures=True)
    return finished
