r"""Runs several invocations of the repository's scripts in one interpreter
(importing torch and PyG costs seconds per interpreter), each as
``python SCRIPT ARGS`` or ``python -m MODULE ARGS`` would run it: as
``__main__``, with its own :obj:`sys.argv`, the script's folder first on the
module search path, its own stdout and stderr, and the exit code that
Python would give (:obj:`SystemExit`, 1 after an uncaught exception, whose
traceback goes to its stderr). The first invocation runs in a fresh
interpreter; the others after it, in the order given."""

import json
import subprocess
import sys
from typing import List, Optional

_MARK = 'invocation results: '
_RUN_ALL = (
    f'MARK = {_MARK!r}\n'
    + r"""
import contextlib, io, json, os, runpy, sys, traceback

results = []
for kind, target, argv in json.loads(sys.argv[1]):
    out, err, code = io.StringIO(), io.StringIO(), 0
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [target, *argv]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                if kind == 'module':
                    runpy.run_module(target, run_name='__main__',
                                     alter_sys=True)
                else:
                    sys.path.insert(0, os.path.dirname(
                        os.path.abspath(target)))
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
    results.append((code, out.getvalue(), err.getvalue()))
print('\n' + MARK + json.dumps(results))
"""
)


def script(path: str, *argv: str) -> tuple:
    r"""An invocation of ``python PATH ARGV``."""
    return ('script', str(path), [str(a) for a in argv])


def module(name: str, *argv: str) -> tuple:
    r"""An invocation of ``python -m NAME ARGV``."""
    return ('module', name, [str(a) for a in argv])


def run_in_one_interpreter(
    invocations: List[tuple],
    env: Optional[dict] = None,
    cwd: Optional[str] = None,
    timeout: float = 600,
) -> List[subprocess.CompletedProcess]:
    r"""Runs :obj:`invocations` (of :func:`script` and :func:`module`) one
    after the other in one new interpreter; returns the result of each as
    :obj:`subprocess.run` would (:obj:`returncode`, :obj:`stdout`,
    :obj:`stderr`)."""
    proc = subprocess.run(
        [sys.executable, '-c', _RUN_ALL, json.dumps(invocations)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    last = proc.stdout.rsplit('\n' + _MARK, 1)[-1]
    results = json.loads(last.splitlines()[0])
    return [
        subprocess.CompletedProcess(
            [kind, target, *argv], code, stdout, stderr
        )
        for (kind, target, argv), (code, stdout, stderr) in zip(
            invocations, results
        )
    ]
