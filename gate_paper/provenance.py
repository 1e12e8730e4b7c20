r"""What made a run: the ``provenance`` of its run file
(:mod:`gate_paper.store`).

:func:`environment` is the same for every run of a process: the commit
(``git`` in the repository, or ``GATE_PAPER_COMMIT`` where the checkout has
no ``.git``, as on a lent GPU machine) and whether the tree was clean, the
Python, torch, PyG and Triton versions, the host. The runner
(:func:`gate_paper.runner.execute`) adds the threads and the wall time of
the run; the run adds what only it knows (:func:`of_run`: device, dtype,
kernel, compiled or not, epochs run). A value that is not known is
``null``, and ``unknown`` names it with why.

Files written before run files recorded this carry ``{"recorded": false,
"note": ...}`` (:data:`NOT_RECORDED`).
"""

import functools
import importlib.metadata
import os
import platform
import subprocess
from typing import Callable, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The provenance of the run files written before it was recorded.
NOT_RECORDED = {
    'recorded': False,
    'note': 'written before run files recorded their provenance: the '
    'commit, library versions, device, threads and whether the run was '
    'compiled were not kept; the results are as the run wrote them',
}


def _version(package: str) -> Optional[str]:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(*argv) -> Optional[str]:
    try:
        done = subprocess.run(
            ['git', '-C', ROOT, *argv],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


@functools.cache
def environment() -> dict:
    r"""The provenance shared by every run of this process."""
    unknown = {}
    commit = _git('rev-parse', 'HEAD')
    clean = None
    if commit is not None:
        commit = commit.strip()
        status = _git('status', '--porcelain', '--untracked-files=no')
        clean = None if status is None else status.strip() == ''
        if clean is None:
            unknown['clean'] = 'git status failed'
    else:
        commit = os.environ.get('GATE_PAPER_COMMIT') or None
        unknown['clean'] = 'no git checkout here'
        if commit is None:
            unknown['commit'] = 'no git checkout here and no GATE_PAPER_COMMIT'
    env = {
        'recorded': True,
        'commit': commit,
        'clean': clean,
        'python': platform.python_version(),
        'torch': _version('torch'),
        'torch_geometric': _version('torch_geometric'),
        'triton': _version('triton'),
        'host': platform.node(),
    }
    if unknown:
        env['unknown'] = unknown
    return env


def commit_known(given: Optional[str] = None) -> bool:
    r"""Whether the run files written now record a commit: ``given`` (a
    ``--commit``), ``$GATE_PAPER_COMMIT`` or the checkout's."""
    return bool(
        given or os.environ.get('GATE_PAPER_COMMIT') or environment()['commit']
    )


def of_run(
    device, dtype, compiled: bool, epochs_run: int, kernel: Optional[str]
) -> dict:
    r"""What a run knows of itself: ``device`` (a :class:`torch.device`),
    its name (on CUDA also ``max_memory_mib``, the peak allocated since
    the run began: :func:`reset_peak_memory`), ``dtype``, the attention
    kernel its GATE layers ran (``None`` for a model without them),
    whether the forward ran compiled, the epochs run."""
    import torch

    device = torch.device(device)
    memory = {}
    if device.type == 'cuda':
        name = torch.cuda.get_device_name(device)
        peak = torch.cuda.max_memory_allocated(device)
        memory = {'max_memory_mib': round(peak / 2**20, 1)}
    else:
        name = _cpu_name()
    return {
        **memory,
        'device': str(device),
        'device_name': name,
        'dtype': str(dtype).replace('torch.', ''),
        'kernel': kernel,
        'compiled': bool(compiled),
        'epochs_run': int(epochs_run),
    }


def reset_peak_memory() -> None:
    r"""Starts a run's ``max_memory_mib`` (:func:`of_run`): each CUDA
    device's peak allocated back to what is allocated now, so that a run
    records its own peak, not that of an earlier run of the same (worker)
    process. Nothing where this process has not used CUDA."""
    import sys

    torch = sys.modules.get('torch')
    if torch is not None and torch.cuda.is_initialized():
        for index in range(torch.cuda.device_count()):
            torch.cuda.reset_peak_memory_stats(index)


def _cpu_name() -> str:
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def of_full_batch_run(
    x, num_edges: int, gate: bool, compile_after: Optional[int]
) -> Callable[[int], dict]:
    r""":func:`of_run` of a full-batch run on node features ``x`` with
    ``num_edges`` edges (self-loops included), of a model with GATE layers
    or not (``gate``), compiled after ``compile_after`` epochs (``None``:
    never), as a function of the epochs run."""
    kernel = gate_kernel(x[:1], num_edges) if gate else None

    def facts(epochs_run: int) -> dict:
        compiled = compile_after is not None and epochs_run > compile_after
        return of_run(x.device, x.dtype, compiled, epochs_run, kernel)

    return facts


def gate_kernel(value, num_edges: int) -> str:
    r"""The kernel that :class:`~torch_geometric_gate.GATEConv` runs on
    projections like ``value`` with ``num_edges`` edges (self-loops
    included) under the current ``attention_kernel`` setting."""
    from torch_geometric_gate.ops import current_settings, dispatch

    return dispatch.select(current_settings(), value, [], num_edges)
