r"""The GPU run queue: the real-graph runs that need a GPU, in a fixed
priority order, in calls of a few minutes on a lent machine, each call
going on from the runs committed in the run store (``gate_paper/runs``).

Priority (:func:`plan`), each tier in its order, depth by depth, split by
split, the models of a split side by side:

1. Tolokers, the paper's recipe, GATE and GAT, depth 5 then 10, splits
   0-9 (study ``real_graphs_tolokers``);
2. Tolokers, the paper's recipe, MLP+GAT, MLP and FAGCN (the same study);
3. the strong recipe (Platonov et al.'s setup, ``--recipes strong`` of
   :mod:`gate_paper.real_graphs`), GAT-sep and GATE-sep on Minesweeper and
   Tolokers, depths 1-5, splits 0-9 (study ``real_graphs_strong``);
4. the strong recipe's other models (GAT, GATv2, GATE).

The configurations are those :mod:`gate_paper.real_graphs` makes for the
same options, so its ``--tables-only`` reads the runs.

``run`` (one call, at most ``--budget`` seconds): ``--procs`` worker
processes share the device; each takes the next unfinished run (a run whose
file is in ``--store`` is finished), skipping a run that the time left
cannot hold by what this call measured. Each finished run is written into
a work folder by its worker (one atomically written file) and, at once,
into ``$OUT`` (``--out``): ``runs.tar`` (every run file finished in this
call, ``<study>/<file>.json``) and ``summary.json`` (the device, the
processes, seconds per epoch per model, what finished, what is left), each
rewritten atomically after every run, and ``log.txt``: three files. A
worker that dies (SIGKILL) is reported and its run goes back into the
queue once; a run that raises (CUDA out of memory) is reported and not
tried again in the call; when the time is up the runs still going are
ended (none is written half; one whose file was written is kept) and the
call ends with code 0.

``unpack OUT/runs.tar``: validates every run file, writes those the store
lacks into it, then rebuilds the tables (:func:`rebuild_tables`): the
docs' for the real runs of the default store, else those of
``--tables-dir``.

``plan``: what is done and what is next, per tier.

``--dry``: the same plumbing on the CPU with tiny runs (width 8, two
heads, ``--dry-epochs`` epochs) on generated graphs in PyG's raw layout of
Tolokers and Minesweeper (unless ``--data-root`` is given); for the tests.
Without ``--dry`` the data root defaults to ``$GATE_DATA_ROOT``, else
``data/``, and datasets it lacks are downloaded by PyG's classes.

    python -m gate_paper.run_queue run --out $OUT --procs 8 \
        --budget 480 --data-root gpu-data
    python -m gate_paper.run_queue unpack $OUT/runs.tar
"""

import argparse
import collections
import functools
import os
import shutil
import signal
import statistics
import sys
import tarfile
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context

from gate_paper import provenance, runner, store
from gate_paper.queue_outputs import Outputs
from gate_paper.queue_plan import (
    STORE,
    TABLES,
    done_in,
    measured,
    plan,
    show_plan,
)
from gate_paper.queue_results import rebuild_tables, unpack


def write_tiny_data(root):
    r"""Tiny random graphs in the raw layout of PyG's
    ``HeterophilousGraphDataset`` for Tolokers and Minesweeper (``--dry``):
    60 nodes, 7 features, 2 classes, 10 random 50/25/25 splits."""
    import numpy as np

    for seed, name in enumerate(('tolokers', 'minesweeper')):
        rng = np.random.default_rng(seed)
        n = 60
        edges = rng.integers(0, n, size=(3 * n, 2))
        edges = edges[edges[:, 0] != edges[:, 1]]
        edges = np.unique(np.sort(edges, axis=1), axis=0)
        masks = np.zeros((3, 10, n), bool)
        for i in range(10):
            perm = rng.permutation(n)
            masks[0, i, perm[: n // 2]] = True
            masks[1, i, perm[n // 2 : 3 * n // 4]] = True
            masks[2, i, perm[3 * n // 4 :]] = True
        raw = os.path.join(root, 'heterophilous', name, 'raw')
        os.makedirs(raw, exist_ok=True)
        np.savez(
            os.path.join(raw, f'{name}.npz'),
            node_features=rng.normal(size=(n, 7)).astype(np.float32),
            node_labels=np.arange(n) % 2,
            edges=edges,
            train_masks=masks[0],
            val_masks=masks[1],
            test_masks=masks[2],
        )


# One call ------------------------------------------------------------------


class _Call:
    def __init__(self, args, order, done):
        self.args = args
        self.start = time.monotonic()
        self.deadline = self.start + args.budget
        self.order = order
        self.done = set(done)
        self.todo = collections.deque(
            (t, s, c) for t, s, c in order if store.run_id(c) not in done
        )
        self.attempts = collections.Counter()
        self.records = []
        self.events = []
        self.device_name = None
        self.gpu = []  # (utilisation %, memory used MiB) samples

    def left(self):
        return self.deadline - time.monotonic()

    def expected(self, config):
        # Seconds a run of this model and depth takes: the median of this
        # call's (a worker's first run also compiles); None before any.
        walls = [
            r['provenance']['wall_s']
            for r in self.records
            if all(
                r['config'][k] == config[k]
                for k in ('dataset', 'recipe', 'model', 'num_layers')
            )
        ]
        return statistics.median(walls) if walls else None

    def summary(self):
        tiers = collections.OrderedDict()
        for tier, _, c in self.order:
            t = tiers.setdefault(str(tier), {'runs': 0, 'finished': 0})
            t['runs'] += 1
            t['finished'] += store.run_id(c) in self.done
        return {
            'device_name': self.device_name,
            'procs': self.args.procs,
            'budget_s': self.args.budget,
            'elapsed_s': round(time.monotonic() - self.start, 1),
            'dry': self.args.dry,
            'finished_this_call': len(self.records),
            'runs_per_hour': round(
                3600
                * len(self.records)
                / max(time.monotonic() - self.start, 1),
                1,
            ),
            'gpu_utilisation_mean': (
                round(statistics.mean(u for u, _ in self.gpu), 1)
                if self.gpu
                else None
            ),
            'gpu_memory_used_max_mib': (
                max(m for _, m in self.gpu) if self.gpu else None
            ),
            'tiers': tiers,
            'seconds_per_epoch': measured(self.records, self.args.procs),
            'events': self.events,
            'finished': [store.run_id(r['config']) for r in self.records],
        }


def run(args):
    order = plan(args.dry_epochs if args.dry else None)
    work = args.work or tempfile.mkdtemp(prefix='gate_queue_')
    for study in {s for _, s, _ in order}:
        os.makedirs(os.path.join(work, study), exist_ok=True)
    done = done_in(
        lambda s: [os.path.join(args.store, s), os.path.join(work, s)], order
    )
    call = _Call(args, order, done)
    outputs = Outputs(args.out, work, call.summary)
    outputs.log(
        f'{len(order)} runs in the queue, {len(done & _ids(order))} '
        f'finished in {args.store}; {args.procs} processes, '
        f'{args.budget} s'
    )
    outputs.write()
    if not call.todo:
        outputs.log('nothing left to run')
        return 0
    settings = _prepare(args, order, work)
    previous = signal.signal(signal.SIGTERM, runner._on_sigterm)
    try:
        _loop(call, outputs, settings, work)
    except (KeyboardInterrupt, runner.Terminated) as e:
        outputs.log(f'stopped by {type(e).__name__}')
        call.events.append(f'stopped by {type(e).__name__}')
        return 130 if isinstance(e, KeyboardInterrupt) else 143
    finally:
        signal.signal(signal.SIGTERM, previous)
        outputs.write()
        outputs.log(
            f'{len(call.records)} runs finished in this call, '
            f'{len(call.todo)} left, {time.monotonic() - call.start:.0f} s'
        )
        outputs.log_file.close()
    return 0


def _ids(order):
    return {store.run_id(c) for _, _, c in order}


def _prepare(args, order, work):
    import torch

    from gate_paper import data as gp_data
    from gate_paper.real_graphs import main_metric

    device = args.device
    if device == 'auto':  # (--dry sets cpu)
        if not torch.cuda.is_available():
            raise SystemExit(
                'error: no CUDA device (torch.cuda.is_available() is False '
                f'with torch {torch.__version__}): the queue runs GPU runs; '
                '--device cpu runs them on the CPU'
            )
        device = 'cuda'
    datasets = sorted({c['dataset'] for _, _, c in order})
    source = args.data_root
    if source is None and args.dry:  # --dry without data: generated graphs
        source = os.path.join(work, 'data')
        write_tiny_data(source)
    else:  # PyG's download where the root lacks a dataset
        source = source or gp_data.default_root()
        try:
            gp_data.fetch(datasets, source)
        except FileNotFoundError as e:  # (it names the files and the fix)
            raise SystemExit(f'error: --data-root: {e}') from None
    root = os.path.join(work, 'processed')
    for dataset in datasets:  # a copy the workers process, not the source
        for name in gp_data.raw_files(dataset):
            path, copy = os.path.join(source, name), os.path.join(root, name)
            if os.path.isfile(path):
                os.makedirs(os.path.dirname(copy), exist_ok=True)
                shutil.copy(path, copy)
    for dataset in datasets:  # process each once, before the workers
        data, _ = gp_data.load_dataset(dataset, root, False, False)
        gp_data.split_masks(data, 0, main_metric(dataset) == 'roc_auc')
    return {
        'root': root,
        'device': device,
        'plot_dir': None,
        'plot_splits': set(),
        'compile_after': None,
    }


def _new_pool(args):
    return ProcessPoolExecutor(
        args.procs,
        mp_context=get_context('spawn'),
        initializer=runner._init_worker,
        initargs=(args.threads, os.getpid()),
    )


def _end(pool):
    # (`_processes` is None once the pool is shut down.)
    for process in list((getattr(pool, '_processes', None) or {}).values()):
        process.kill()  # a run still going: nothing of it is written
    pool.shutdown(wait=True, cancel_futures=True)


def _pid_file(folder, config):
    return os.path.join(folder, f'.{store.run_id(config)}.pid')


def _attempt(task, config, folder):
    r"""One run in a worker (:func:`runner.execute`), with its worker's
    process id in a file of the run while it runs: when a worker dies and
    the pool ends the others, the queue tells the run it died on from the
    runs the pool ended (:func:`_renew`)."""
    path = _pid_file(folder, config)
    with open(path, 'w') as f:
        f.write(str(os.getpid()))
    try:
        return runner.execute(task, config, folder)
    finally:
        os.remove(path)


def _loop(call, outputs, settings, work):
    from gate_paper.real_graphs import run_one

    args = call.args
    task = functools.partial(run_one, settings)
    pool, running = _new_pool(args), {}
    sampled = 0.0
    try:
        while True:
            skipped = collections.deque()
            broken = False
            while call.todo and len(running) < args.procs:
                tier, study, c = call.todo.popleft()
                need = call.expected(c)
                if need is not None and need > call.left():
                    skipped.append((tier, study, c))
                    continue
                folder = os.path.join(work, study)
                try:
                    future = pool.submit(_attempt, task, c, folder)
                except BrokenProcessPool:  # a worker died since the wait
                    call.todo.appendleft((tier, study, c))  # not started
                    broken = True
                    break
                running[future] = (tier, study, c)
                outputs.log(f'start tier {tier}: {store.run_id(c)}')
            call.todo.extendleft(reversed(skipped))
            if broken:
                pool = _renew(call, outputs, pool, running, work)
                running = {}
                continue
            if not running:
                break
            ready, _ = wait(
                running,
                timeout=max(min(call.left(), 10), 0),
                return_when=FIRST_COMPLETED,
            )
            if time.monotonic() - sampled >= 10:
                call.gpu += _gpu_sample()
                sampled = time.monotonic()
            if not ready and call.left() > 0:
                continue
            if not ready:
                outputs.log(
                    f'time is up: {len(running)} runs still going are '
                    'ended (nothing of them is written)'
                )
                call.events.append(f'time up, {len(running)} runs ended')
                call.todo.extendleft(reversed(list(running.values())))
                break
            lost = []  # runs whose results said the pool broke
            for future in ready:
                tier, study, c = running.pop(future)
                try:
                    record = future.result()
                except BrokenProcessPool:
                    lost.append((tier, study, c))
                    continue
                except Exception as e:  # e.g. CUDA out of memory
                    text = (
                        f'{store.run_id(c)} failed ({type(e).__name__}: '
                        f'{e}): not tried again in this call'
                    )
                    outputs.log(text)
                    call.events.append(text)
                    continue
                _finished(call, outputs, tier, study, record)
            if lost:
                pool = _renew(call, outputs, pool, running, work, lost)
                running = {}
    finally:
        _end(pool)
        _collect(call, outputs, work)


def _finished(call, outputs, tier, study, record):
    call.records.append(record)
    call.done.add(store.run_id(record['config']))
    call.device_name = record['provenance'].get('device_name')
    outputs.add(study, record)
    p = record['provenance']
    outputs.log(
        f'done tier {tier}: {store.run_id(record["config"])} '
        f'({record["status"]}, {p["wall_s"]:.1f} s, {p.get("epochs_run")} '
        'epochs)'
    )


def _collect(call, outputs, work):
    r"""The run files that workers wrote but whose results never reached
    this process (a pool that broke, or the time that was up, just after
    the run ended), as finished runs of this call."""
    from gate_paper.real_graphs import RESULTS

    for tier, study, c in call.order:
        path = os.path.join(work, study, store.run_id(c) + '.json')
        if store.run_id(c) not in call.done and os.path.exists(path):
            _finished(call, outputs, tier, study, store.read(path, RESULTS))
    call.todo = collections.deque(
        item for item in call.todo if store.run_id(item[2]) not in call.done
    )


def _renew(call, outputs, pool, running, work, lost=()):
    r"""A new pool for one that a dead worker broke (its pool refuses
    every run): the runs still going in it, and ``lost`` (those whose
    results said so), go again. The pool ends its other workers with
    SIGTERM: a run whose worker died otherwise (SIGKILL, SIGSEGV) is the
    one that broke it, and counts an attempt; the others do not."""
    processes = list((getattr(pool, '_processes', None) or {}).values())
    pool.shutdown(wait=True, cancel_futures=True)  # its workers ended
    ended = {p.pid for p in processes if p.exitcode == -signal.SIGTERM}
    for item in [*lost, *running.values()]:
        _, study, c = item
        try:
            with open(_pid_file(os.path.join(work, study), c)) as f:
                pid = int(f.read())
            os.remove(f.name)
        except (OSError, ValueError):  # not started
            pid = None
        _requeue(call, outputs, item, work, died=pid is not None
                 and pid not in ended)  # fmt: skip
    return _new_pool(call.args)


def _gpu_sample():
    r"""``[(utilisation %, memory used MiB)]`` of the first GPU from
    ``nvidia-smi``, ``[]`` without one."""
    import subprocess

    try:
        done = subprocess.run(
            ['nvidia-smi', '--query-gpu=utilization.gpu,memory.used']
            + ['--format=csv,noheader,nounits', '--id=0'],
            capture_output=True,
            text=True,
            timeout=10,
        )
        util, memory = done.stdout.split(',')
        return [(float(util), float(memory))]
    except (OSError, ValueError, subprocess.SubprocessError):
        return []


def _requeue(call, outputs, item, work, died=True):
    r"""``item`` back into the queue after its pool broke, once if its own
    worker ``died`` during it, always if another's did."""
    tier, study, c = item
    key = store.run_id(c)
    if os.path.exists(os.path.join(work, study, key + '.json')):
        return  # it finished before its worker died (_collect adds it)
    if not died:
        call.todo.appendleft(item)
        outputs.log(f'{key} goes again (another worker died)')
        return
    call.attempts[key] += 1
    if call.attempts[key] > 1:
        text = f'a worker died twice on {key}: not tried again in this call'
    else:
        call.todo.appendleft(item)
        text = f'a worker died (SIGKILL?) during {key}: it goes again'
    outputs.log(text)
    call.events.append(text)


# Command line --------------------------------------------------------------


def parse_args(argv=None):
    from gate_paper.cli import (
        check_device,
        commit_hash,
        device_name,
        float_in,
        int_at_least,
    )

    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = parser.add_subparsers(dest='command', required=True)
    go = sub.add_parser('run', help='one call: the next runs, into --out')
    go.add_argument('--out', default=os.environ.get('OUT'))
    go.add_argument(
        '--budget',
        type=float_in(10, 540),
        default=480,
        help='seconds this call may take, 10 to 540 (default 480)',
    )
    go.add_argument('--procs', type=int_at_least(1), default=8)
    go.add_argument(
        '--threads',
        type=int_at_least(1),
        default=1,
        help='CPU threads of each process (default 1)',
    )
    go.add_argument(
        '--data-root',
        help="the data root, laid out as PyG's dataset classes lay out "
        'their raw files (default: $GATE_DATA_ROOT, else data/; missing '
        'datasets are downloaded; with --dry: generated tiny graphs)',
    )
    go.add_argument('--store', default=STORE)
    go.add_argument('--work', help='the work folder (default: a new one)')
    go.add_argument(
        '--device',
        type=device_name,
        default='auto',
        help='auto (the default): CUDA, an error without it (cpu with '
        "--dry); 'cpu', 'cuda' or 'cuda:N'",
    )
    go.add_argument(
        '--commit',
        type=commit_hash,
        help='the commit of this checkout, for the run files where it has '
        'no .git (GATE_PAPER_COMMIT)',
    )
    go.add_argument('--dry', action='store_true')
    go.add_argument('--dry-epochs', type=int_at_least(1), default=3)
    back = sub.add_parser('unpack', help='runs.tar into the store, tables')
    back.add_argument('tar')
    back.add_argument('--store', default=STORE)
    back.add_argument('--tables-dir', help=f'default: {TABLES} (real runs)')
    back.add_argument('--no-tables', action='store_true')
    back.add_argument(
        '--dry-epochs',
        type=int_at_least(1),
        help='the runs are those of run --dry --dry-epochs N',
    )
    show = sub.add_parser('plan', help='what is done and next, per tier')
    show.add_argument('--store', default=STORE)
    show.add_argument('--procs', type=int_at_least(1), default=8)
    args = parser.parse_args(argv)
    if args.command == 'run':
        if not args.out:
            parser.error('run: --out (or $OUT) is required')
        if args.dry and args.device == 'auto':
            args.device = 'cpu'
        check_device(go, args.device)
        if not (args.dry or provenance.commit_known(args.commit)):
            parser.error(
                'run: no git checkout here: pass --commit <the full hash of '
                "this checkout's commit> (COMMIT=... for gpu_queue.sh), which "
                'every run file records (unpack refuses runs without it)'
            )
        runner.check_out_dir(go, args.out, '--out')  # before any run
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.command == 'run':
        if args.commit:  # the workers inherit it
            os.environ['GATE_PAPER_COMMIT'] = args.commit
        return run(args)
    if args.command == 'unpack':
        try:
            counts = unpack(args.tar, args.store, args.dry_epochs)
        except (ValueError, OSError, tarfile.TarError) as e:
            raise SystemExit(f'error: {e}; nothing was written') from None
        print(f'unpacked: {counts}')
        # The docs' tables from the real runs of the default store alone:
        real = args.store == STORE and not args.dry_epochs
        tables = args.tables_dir or (TABLES if real else None)
        if tables is None or args.no_tables:
            print('tables: not rebuilt (--tables-dir names where to)')
        else:
            rebuild_tables(args.store, tables, args.dry_epochs)
        return 0
    show_plan(args.store, args.procs)
    return 0


if __name__ == '__main__':
    sys.exit(main())
