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
imported). The edges come as a plain :obj:`[2, E]` tensor (input
:obj:`plain`) and as a column-sorted :class:`EdgeIndex` (:obj:`edge-index`,
as :obj:`kernels.py --inputs` names it). Written after every configuration::

    python benchmark/host_ops.py --out benchmark/results
"""

import argparse
import os
from typing import Callable, List

from cli import (
    DEFAULT_DATA,
    DEVICE_HELP,
    add_shape_args,
    check_devices,
    default_device,
    device_name,
    file_stem,
    int_at_least,
    parse_checked,
)
from report import result_notes, write_results

COLUMNS = [
    'device', 'graph', 'num_nodes', 'num_edges', 'heads', 'hidden', 'input',
    'layer', 'kernel', 'aten_ops', 'launches', 'host_ops', 'host_vs_gatv2',
    'sync_ops', 'sorts', 'top_ops',
]  # fmt: skip
TITLE = 'Host operators per training step'


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add_shape_args(parser, ['random-200'], hidden=16, channels=8)
    parser.add_argument('--data-root', default=DEFAULT_DATA)
    parser.add_argument(
        '--kernels', nargs='+', default=['triton', 'chunked', 'reference'],
        choices=['triton', 'chunked', 'reference'],
    )  # fmt: skip
    parser.add_argument(
        '--device',
        type=device_name,
        help=f'cpu, cuda or cuda:N ({DEVICE_HELP})',
    )
    parser.add_argument('--out', default='benchmark/results')
    parser.add_argument('--name', type=file_stem, default='host-ops')
    parser.add_argument(
        '--top',
        type=int_at_least(0),
        default=8,
        help='the most frequent operators listed per row',
    )
    args = parse_checked(parser, argv)
    args.device = args.device or default_device()
    check_devices(parser, [args.device], '--device')
    return args


def _inputs(edge_index, num_nodes, kind):
    if kind == 'plain':
        return edge_index
    from torch_geometric import EdgeIndex

    ei = EdgeIndex(edge_index, sparse_size=(num_nodes, num_nodes))
    return ei.sort_by('col')[0]


def measure(
    args, written: Callable[[List[dict]], None] = lambda rows: None
) -> List[dict]:
    r"""The rows of every graph, heads, input, layer and kernel;
    :obj:`written` is called with the rows so far after each of them."""
    # op_counter first: it picks Triton's interpreter before common's
    # imports load Triton.
    from op_counter import count_step  # isort: skip
    import torch
    from common import Step, load_graph, make_layer

    device = torch.device(args.device)
    rows = []
    for graph in args.graphs:
        x, edge_index = load_graph(
            graph, args.channels, device, args.data_root
        )
        num_nodes = x.size(0)
        for heads in args.heads:
            for kind in ('plain', 'edge-index'):
                ei = _inputs(edge_index, num_nodes, kind)
                base = dict(
                    device=device.type, graph=graph, num_nodes=num_nodes,
                    num_edges=edge_index.size(1), heads=heads,
                    hidden=args.hidden, input=kind,
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
                    written(rows)
                    print(
                        f'{graph} heads={heads} {kind} {layer} {name}: '
                        f'{got["aten_ops"]} ATen ops + {got["launches"]} '
                        f'launches ({dict(got["launch_names"])}), '
                        f'{got["sync_ops"]} syncing, {got["sorts"]} sorts',
                        flush=True,
                    )
    return rows


def main(argv=None):
    args = parse_args(argv)
    # op_counter first: it picks Triton's interpreter before the notes
    # (Triton's version) import Triton.
    import op_counter  # noqa: F401

    stem = os.path.join(args.out, args.name)
    notes = result_notes('host_ops.py', argv, __doc__)
    # Written after every configuration: a kill (the GPU session's time
    # limit) keeps the rows measured before it.
    return measure(
        args, lambda rows: write_results(rows, stem, COLUMNS, TITLE, notes)
    )


if __name__ == '__main__':
    main()
