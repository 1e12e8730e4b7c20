r"""A study of toy runs for the runner's tests, run as ``python -m
toy_study`` with this folder on ``PYTHONPATH`` (so that spawned workers
import it). A run is ``KIND:N``:

- ``ok``: returns at once;
- ``wait``: writes ``<marks>/pid-N`` and waits for ``<marks>/go``;
- ``kill``: waits until ``<marks>/go`` or a run file of an ``ok`` run
  exists, then SIGKILLs its own process (as the OOM killer does);
- ``diverge``: raises :class:`~gate_paper.training.Diverged`;
- ``barrier``: writes ``<marks>/barrier-N`` and waits until ``--parties``
  such files exist (invocations running at the same time);
- ``workers``: counts the worker processes of the invocation;
- ``threads``: torch's threads during the run;
- ``swallow``: writes ``<marks>/pid-N`` and waits for ``<marks>/go`` in a
  loop that catches :class:`Exception` (as a compiler's fallback does);
- ``lock``: keeps a multiprocessing lock in the worker (a named semaphore,
  as tqdm's write lock is), for the worker's exit to release.
"""

import argparse
import functools
import glob
import os
import signal
import time

from gate_paper.runner import (
    Diverged,
    add_runner_args,
    check_out_dir,
    run_all,
)

_LOCKS = []  # the 'lock' runs' locks, kept for the worker's life


def _wait_for(condition, what):
    deadline = time.monotonic() + 120
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f'toy run: gave up waiting for {what}')
        time.sleep(0.02)


def _workers_of(pid):
    with open(f'/proc/{pid}/task/{pid}/children') as f:
        children = f.read().split()
    count = 0
    for child in children:
        try:
            with open(f'/proc/{child}/cmdline', 'rb') as f:
                count += b'spawn_main' in f.read()
        except FileNotFoundError:
            pass
    return count


def run_one(settings, config):
    kind, n, marks = config['kind'], config['n'], settings['marks']
    if kind == 'wait':
        # Written whole, then moved into place: a test that sees the file
        # reads the pid (it polls for the file while this writes).
        path = os.path.join(marks, f'pid-{n}')
        with open(path + '.tmp', 'w') as f:
            f.write(str(os.getpid()))
        os.replace(path + '.tmp', path)
        _wait_for(lambda: os.path.exists(os.path.join(marks, 'go')), 'go')
    elif kind == 'kill':
        _wait_for(
            lambda: glob.glob(os.path.join(settings['out_dir'], 'ok_*.json')),
            'a finished run',
        )
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == 'diverge':
        raise Diverged(3, 'the loss is NaN or infinite')
    elif kind == 'barrier':
        open(os.path.join(marks, f'barrier-{n}'), 'w').close()
        _wait_for(
            lambda: (
                len(glob.glob(os.path.join(marks, 'barrier-*')))
                >= settings['parties']
            ),
            'the other invocations',
        )
    elif kind == 'swallow':
        path = os.path.join(marks, f'pid-{n}')
        with open(path + '.tmp', 'w') as f:
            f.write(str(os.getpid()))
        os.replace(path + '.tmp', path)
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(marks, 'go')):
            try:
                time.sleep(0.02)
                assert time.monotonic() < deadline
            except Exception:  # noqa: BLE001 (what the test is about)
                pass
    elif kind == 'lock':
        from multiprocessing import get_context

        _LOCKS.append(get_context('spawn').Lock())
    elif kind == 'workers':
        return {'workers': _workers_of(os.getppid()), 'pid': os.getpid()}
    elif kind == 'threads':
        import torch

        return {'threads': torch.get_num_threads(), 'pid': os.getpid()}
    return {'value': 2 * n, 'pid': os.getpid()}


def configs(specs):
    return [
        {'kind': kind, 'n': int(n)}
        for kind, n in (spec.split(':') for spec in specs)
    ]


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument('runs', nargs='+')
    parser.add_argument('--out-dir', required=True)
    parser.add_argument('--marks', required=True)
    parser.add_argument('--parties', type=int, default=1)
    add_runner_args(parser)
    args = parser.parse_args(argv)
    check_out_dir(parser, args.out_dir, '--out-dir')
    settings = {
        'marks': args.marks,
        'out_dir': args.out_dir,
        'parties': args.parties,
    }
    records = run_all(
        configs(args.runs),
        functools.partial(run_one, settings),
        args.out_dir,
        args,
    )
    print(f'{len(records)} runs finished')


if __name__ == '__main__':
    main()
