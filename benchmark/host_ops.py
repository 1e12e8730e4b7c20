r"""The host's work per training step: ATen operators and Triton launches.

One training step (forward, :obj:`out.float().sum()`, backward) of GATE
under each attention kernel and of GATv2Conv, in one harness: the ATen
operators it issues (counted with a :class:`TorchDispatchMode`, backward
included) and the Triton kernels it launches. The operators issued inside
a launch (the Triton interpreter's own, on CPU) are not counted: the
launch is counted instead. The ratio over GATv2Conv's operators is the
host floor of issue 48 (goal: at most 0.6). Operators that make the host
wait for the device (:obj:`aten._local_scalar_dense`, :obj:`aten.nonzero`
...) are counted apart. On CPU the Triton kernels run under the
interpreter (:obj:`TRITON_INTERPRET=1`, set here before Triton is
imported)::

    python benchmark/host_ops.py --out benchmark/results
"""

import argparse
import contextlib
import os
import sys
import threading
from collections import Counter
from typing import Dict, Iterator, List

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


COLUMNS = [
    'device', 'graph', 'num_nodes', 'num_edges', 'heads', 'input', 'layer',
    'kernel', 'aten_ops', 'launches', 'host_ops', 'host_vs_gatv2',
    'sync_ops', 'sorts', 'top_ops',
]  # fmt: skip


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


def parse_args(argv=None) -> argparse.Namespace:
    from common import graph_name
    from report import output_folder

    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument(
        '--graphs', nargs='+', type=graph_name, default=['random-200']
    )
    parser.add_argument('--heads', nargs='+', type=int, default=[1, 8])
    parser.add_argument('--hidden', type=int, default=16)
    parser.add_argument('--channels', type=int, default=8)
    parser.add_argument(
        '--kernels', nargs='+', default=['triton', 'chunked', 'reference'],
        choices=['triton', 'chunked', 'reference'],
    )  # fmt: skip
    parser.add_argument(
        '--device', default='cuda' if torch.cuda.is_available() else 'cpu'
    )
    parser.add_argument('--out', default='benchmark/results')
    parser.add_argument('--name', default='host-ops')
    parser.add_argument('--top', type=int, default=8)
    args = parser.parse_args(argv)
    output_folder(parser, args.out)
    return args


def _inputs(edge_index, num_nodes, kind):
    if kind == 'plain':
        return edge_index
    from torch_geometric import EdgeIndex

    ei = EdgeIndex(edge_index, sparse_size=(num_nodes, num_nodes))
    return ei.sort_by('col')[0]


def measure(args) -> List[dict]:
    from common import Step, load_graph, make_layer

    device = torch.device(args.device)
    rows = []
    for graph in args.graphs:
        x, edge_index = load_graph(graph, args.channels, device=device)
        num_nodes = x.size(0)
        for heads in args.heads:
            for kind in ('plain', 'edge_index'):
                ei = _inputs(edge_index, num_nodes, kind)
                base = dict(
                    device=device.type, graph=graph, num_nodes=num_nodes,
                    num_edges=edge_index.size(1), heads=heads, input=kind,
                )  # fmt: skip
                runs = [('GATv2', 'eager', None)] + [
                    ('GATE', k, k) for k in args.kernels
                ]
                gatv2 = None
                for layer, name, kernel in runs:
                    model = make_layer(
                        layer, x.size(1), args.hidden, heads
                    ).to(device)
                    got = count_step(Step(model, x, ei, kernel))
                    if layer == 'GATv2':
                        gatv2 = got['host_ops']
                    top = ', '.join(
                        f'{op} {n}'
                        for op, n in got['ops'].most_common(args.top)
                    )
                    rows.append(dict(
                        base, layer=layer, kernel=name,
                        aten_ops=got['aten_ops'], launches=got['launches'],
                        host_ops=got['host_ops'],
                        host_vs_gatv2=got['host_ops'] / gatv2,
                        sync_ops=got['sync_ops'], sorts=got['sorts'],
                        top_ops=top,
                    ))  # fmt: skip
                    print(
                        f'{graph} heads={heads} {kind} {layer} {name}: '
                        f'{got["aten_ops"]} ATen ops + {got["launches"]} '
                        f'launches ({dict(got["launch_names"])}), '
                        f'{got["sync_ops"]} syncing, {got["sorts"]} sorts',
                        flush=True,
                    )
    return rows


def main(argv=None):
    from report import result_notes, write_results

    args = parse_args(argv)
    rows = measure(args)
    notes = result_notes('host_ops.py', argv, __doc__)
    write_results(
        rows, os.path.join(args.out, args.name), COLUMNS,
        'Host operators per training step', notes,
    )  # fmt: skip


if __name__ == '__main__':
    main()
