r"""Runs several invocations of the repository's scripts in one process
forked from a warm interpreter (importing torch and PyG costs seconds per
interpreter), each as ``python SCRIPT ARGS`` or ``python -m MODULE ARGS``
would run it: as ``__main__``, with its own :obj:`sys.argv`, the script's
folder first on the module search path, its own stdout and stderr, and the
exit code that Python would give (:obj:`SystemExit`, 1 after an uncaught
exception, whose traceback goes to its stderr).

The process is forked by :mod:`multiprocessing`'s fork server, which has
imported torch, PyG and the package once (per test process) and nothing
else: every call starts from that state, with the environment, working
directory, :obj:`PYTHONPATH` and :obj:`OMP_NUM_THREADS` it is given. A test
that needs what only a new interpreter shows (the thread count torch picks
at start-up, what a script imports) starts one itself.
"""

import contextlib
import io
import multiprocessing
import os
import runpy
import subprocess
import sys
import traceback
from typing import List, Optional

#: What the fork server imports once; never Triton's kernels, which read
#: ``TRITON_INTERPRET`` when they are defined.
PRELOAD = ['torch', 'torch_geometric', 'torch_geometric_gate']


def script(path: str, *argv: str) -> tuple:
    r"""An invocation of ``python PATH ARGV``."""
    return ('script', str(path), [str(a) for a in argv])


def module(name: str, *argv: str) -> tuple:
    r"""An invocation of ``python -m NAME ARGV``."""
    return ('module', name, [str(a) for a in argv])


def _invoke(kind: str, target: str, argv: List[str]) -> tuple:
    out, err, code = io.StringIO(), io.StringIO(), 0
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [target, *argv]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                if kind == 'module':
                    runpy.run_module(
                        target, run_name='__main__', alter_sys=True
                    )
                else:
                    sys.path.insert(
                        0, os.path.dirname(os.path.abspath(target))
                    )
                    runpy.run_path(target, run_name='__main__')
            except SystemExit as stop:
                code = stop.code
                if code is None:
                    code = 0
                elif not isinstance(code, int):
                    print(code, file=sys.stderr)
                    code = 1
            except BaseException:
                traceback.print_exc()
                code = 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return code, out.getvalue(), err.getvalue()


def _run_all(conn, invocations, env: Optional[dict], cwd: Optional[str]):
    # In the forked process: the environment as a new interpreter would
    # have read it, then the invocations in order.
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
        path = [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p]
        sys.path[1:1] = [p for p in path if p not in sys.path]
    if cwd is not None:
        os.chdir(cwd)
    threads = os.environ.get('OMP_NUM_THREADS')
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    conn.send([_invoke(*invocation) for invocation in invocations])
    conn.close()


def run_in_one_interpreter(
    invocations: List[tuple],
    env: Optional[dict] = None,
    cwd: Optional[str] = None,
    timeout: float = 600,
) -> List[subprocess.CompletedProcess]:
    r"""Runs :obj:`invocations` (of :func:`script` and :func:`module`) one
    after the other in one process forked from the warm interpreter;
    returns the result of each as :obj:`subprocess.run` would
    (:obj:`returncode`, :obj:`stdout`, :obj:`stderr`)."""
    context = multiprocessing.get_context('forkserver')
    context.set_forkserver_preload(PRELOAD)
    receive, send = context.Pipe(duplex=False)
    process = context.Process(
        target=_run_all, args=(send, list(invocations), env, cwd)
    )
    process.start()
    send.close()
    try:
        if not receive.poll(timeout):
            process.kill()
            raise subprocess.TimeoutExpired(invocations, timeout)
        try:
            results = receive.recv()
        except EOFError:  # It died, of a signal or os._exit.
            process.join()
            raise AssertionError(
                f'the process running {invocations} ended without results '
                f'(exit code {process.exitcode})'
            ) from None
    finally:
        receive.close()
        process.join()
    return [
        subprocess.CompletedProcess([kind, target, *argv], *result)
        for (kind, target, argv), result in zip(invocations, results)
    ]
