r"""Does a deep full-batch training step fit? GATE against GATv2Conv.

A model of :obj:`--depth` attention layers of width :obj:`--hidden`
(:obj:`--heads`, concatenated), ReLU in between and a linear classifier,
runs one full-batch training step (forward, cross-entropy, backward) on a
random graph of the size of ogbn-arxiv or ogbn-products, each layer kind
and GATE kernel in a fresh process of its own: on CPU under a cap on the
address space it may add after its imports (RLIMIT_AS), on CUDA within the
GPU's memory. Recorded: the peak memory (CPU: peak resident size; CUDA:
peak allocated) and its growth in the step, the bytes saved for backward,
the step time, or "exceeds cap" / "OOM" and where it happened. Written
after every model::

    python benchmark/deep.py --graph arxiv-size --depth 12 --cap-gb 12
    python benchmark/deep.py --graph products-size --depth 3 \
        --devices cuda --kernels reference chunked triton
"""

import argparse
import os

from cli import (
    GATE_KERNELS,
    LAYERS,
    SIZED_GRAPHS,
    check_devices,
    device_name,
    file_stem,
    float_in,
    fraction,
    int_at_least,
)
from report import (
    output_folder,
    result_notes,
    write_results,
)

COLUMNS = ['device', 'layer', 'kernel', 'graph', 'num_nodes', 'num_edges',
           'depth', 'hidden', 'heads', 'cap_gb', 'status', 'peak_mb',
           'step_mb', 'saved_mb', 'step_ms', 'detail']  # fmt: skip


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument(
        '--graph', default='arxiv-size', choices=sorted(SIZED_GRAPHS)
    )
    parser.add_argument(
        '--scale',
        type=fraction,
        default=1.0,
        help="fraction of the graph's nodes and edges, in (0, 1]",
    )
    parser.add_argument('--depth', type=int_at_least(1), default=12)
    parser.add_argument('--hidden', type=int_at_least(1), default=256)
    parser.add_argument('--heads', type=int_at_least(1), default=1)
    parser.add_argument('--classes', type=int_at_least(2), default=40)
    parser.add_argument(
        '--layers', nargs='+', default=list(LAYERS), choices=LAYERS
    )
    parser.add_argument(
        '--kernels',
        nargs='+',
        default=[None],
        choices=GATE_KERNELS,
        help="GATE's attention kernels (default: 'auto')",
    )
    parser.add_argument(
        '--devices',
        nargs='+',
        type=device_name,
        default=None,
        help='cpu, cuda or cuda:N (default: cpu, and cuda when available)',
    )
    parser.add_argument(
        '--cap-gb',
        type=float_in(0.0),
        default=12.0,
        help='CPU: the address space each process may add '
        'after its imports (0: no cap)',
    )
    parser.add_argument('--threads', type=int_at_least(1), default=1)
    parser.add_argument('--out', default='benchmark/results')
    parser.add_argument('--name', type=file_stem, default='deep')
    args = parser.parse_args(argv)
    if args.hidden % args.heads:
        parser.error(
            f'argument --hidden: expected a multiple of --heads '
            f'({args.heads}), got {args.hidden}'
        )
    check_devices(parser, args.devices or [])
    output_folder(parser, args.out)
    return args


def main(argv=None):
    args = parse_args(argv)
    import torch
    from fresh_process import fresh_process_step

    devices = args.devices or ['cpu'] + ['cuda'] * torch.cuda.is_available()
    stem = os.path.join(args.out, args.name)
    notes = result_notes('deep.py', argv, __doc__)
    channels = SIZED_GRAPHS[args.graph][2]
    rows = []
    for device in devices:
        runs = [('GATE', k) for k in args.kernels if 'GATE' in args.layers]
        runs += [('GATv2', None)] * ('GATv2' in args.layers)
        for layer, kernel in runs:
            spec = dict(
                device=device, layer=layer, kernel=kernel, graph=args.graph,
                scale=args.scale, channels=channels, depth=args.depth,
                hidden=args.hidden, heads=args.heads, classes=args.classes,
                cap_gb=args.cap_gb if device == 'cpu' else None,
                threads=args.threads,
            )  # fmt: skip
            print(f'deep: {device} {layer} {kernel or ""} ...', flush=True)
            row = dict(
                spec, kernel=kernel or ('auto' if layer == 'GATE' else '-')
            )
            row.update(fresh_process_step(spec))
            rows.append(row)
            write_results(rows, stem, COLUMNS,
                          'Deep full-batch training step', notes)  # fmt: skip
            print(row, flush=True)
    return rows


if __name__ == '__main__':
    main()
