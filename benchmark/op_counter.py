r"""What :obj:`host_ops.py` counts with: the ATen operators (by a
:class:`TorchDispatchMode`) and the Triton launches of a block, the
operators issued inside a launch left out, and those that make the host
wait for the device apart.

Importing it sets :obj:`TRITON_INTERPRET=1` where there is no CUDA device,
unless Triton is imported already: import it before anything imports
Triton (:obj:`common` does, through the layers).
"""

import contextlib
import os
import sys
import threading
from collections import Counter
from typing import Dict, Iterator

if 'triton' not in sys.modules and not os.environ.get('TRITON_INTERPRET'):
    import torch

    if not torch.cuda.is_available():  # Before anything imports Triton.
        os.environ['TRITON_INTERPRET'] = '1'

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

#: Operators that copy a device value to the host (a sync on CUDA);
#: :obj:`aten.repeat_interleave` only without :obj:`output_size`.
SYNC_OPS = (
    'aten._local_scalar_dense', 'aten.nonzero', 'aten.item',
    'aten.repeat_interleave', 'aten.unique', 'aten._unique2',
    'aten.unique_consecutive', 'aten.masked_select',
)  # fmt: skip


def _syncs(name: str, args, kwargs) -> bool:
    if name not in SYNC_OPS:
        return False
    if name == 'aten.repeat_interleave':
        return kwargs.get('output_size') is None  # keyword-only
    return True


class _State(threading.local):
    depth = 0


_STATE = _State()


class OpCounter(TorchDispatchMode):
    r"""Counts the ATen operators (by name, e.g. :obj:`aten.sort`) issued
    while it is active, except inside a Triton launch (see
    :func:`counting`)."""

    def __init__(self):
        super().__init__()
        self.ops: Counter = Counter()
        self.launches: Counter = Counter()
        self.syncs: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _STATE.depth == 0:
            name = str(func.overloadpacket)
            self.ops[name] += 1
            if _syncs(name, args, kwargs):
                self.syncs[name] += 1
        return func(*args, **kwargs)


@contextlib.contextmanager
def counting() -> Iterator[OpCounter]:
    r"""A :class:`OpCounter` over the block, with every Triton launch
    (:obj:`kernel[grid](...)`, compiled or interpreted, autotuned or not)
    counted by kernel name and the operators inside it left out. It wraps
    :meth:`KernelInterface.__getitem__`, which Python looks up on the
    class (a test's patch of a kernel's :obj:`run` cannot bypass it)."""
    counter = OpCounter()
    try:
        from triton.runtime.jit import KernelInterface
    except ImportError:  # No Triton: nothing to launch.
        with counter:
            yield counter
        return
    getitem = KernelInterface.__getitem__

    def launcher(self, grid):
        launch = getitem(self, grid)

        def counted(*args, **kwargs):
            if _STATE.depth == 0:
                name = getattr(self, '__name__', None) or getattr(
                    getattr(self, 'fn', None), '__name__', '?'
                )
                counter.launches[name] += 1
            _STATE.depth += 1
            try:
                return launch(*args, **kwargs)
            finally:
                _STATE.depth -= 1

        return counted

    KernelInterface.__getitem__ = launcher
    try:
        with counter:
            yield counter
    finally:
        KernelInterface.__getitem__ = getitem


def count_step(step) -> Dict[str, object]:
    r"""Runs :obj:`step` once to warm up (compiles, caches) and counts a
    second call: returns the operator counter, the launches, and the
    totals."""
    step()
    with counting() as counter:
        step()
    aten = sum(counter.ops.values())
    launches = sum(counter.launches.values())
    syncs = sum(counter.syncs.values())
    sorts = counter.ops['aten.sort'] + counter.ops['aten.argsort']
    return dict(
        ops=counter.ops, launch_names=counter.launches, aten_ops=aten,
        launches=launches, host_ops=aten + launches, sync_ops=syncs,
        sorts=sorts,
    )  # fmt: skip
