r"""Tunes the Triton kernels' edge blocks on a GPU: the training step of
:class:`GATEConv` under ``attention_kernel('triton')`` for each pair of
tile sizes (``FORWARD_TILE`` and ``BACKWARD_TILE`` of
:mod:`torch_geometric_gate.ops.triton`: float32 per ``[BLOCK_E, H, C]``
tile, from which each kernel's edge block follows), next to eager
:class:`GATv2Conv` in the same run, on the graphs, heads and dtypes given.
It writes ``triton_tune.csv`` and ``triton_tune.md`` (step time, peak
memory on CUDA, and the ratio to GATv2Conv and to the current tiles), so
that the defaults can be set from what was measured; the defaults are
restored afterwards. A fixed table, not Triton's autotuner: the block
changes the order of the softmax's sums, and a choice timed afresh in
every process would make results differ between runs::

    python benchmark/triton_tune.py --graphs random-1e6 arxiv-size \
        --heads 1 8 --dtypes float32 bfloat16 --out gpu-out/tune
"""

import argparse
import csv
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conv import (  # noqa: E402
    DTYPES,
    _Step,
    command_line,
    copy_data,
    machine_info,
    make_layer,
    suite_graph,
    time_step,
)

HEADER = ['device', 'graph', 'edges', 'heads', 'dtype', 'forward tile',
          'backward tile', 'step ms', 'peak MB', 'x GATv2Conv',
          'x current tiles']  # fmt: skip


def main(argv=None):
    from torch_geometric_gate.ops import triton as tops

    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--device', default='cuda')
    parser.add_argument('--graphs', nargs='+', default=['random-1e6'])
    parser.add_argument('--heads', type=int, nargs='+', default=[1, 8])
    parser.add_argument('--hidden', type=int, default=64)
    parser.add_argument('--channels', type=int, default=64)
    parser.add_argument(
        '--dtypes', nargs='+', default=['float32'], choices=list(DTYPES)
    )
    parser.add_argument(
        '--forward-tiles', type=int, nargs='+', default=[1024, 2048, 4096]
    )
    parser.add_argument(
        '--backward-tiles', type=int, nargs='+', default=[1024, 2048, 4096]
    )
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--reps', type=int, default=5)
    parser.add_argument(
        '--scale', type=float, default=1.0,
        help='scales the sized graphs (tests: tiny graphs on a CPU)',
    )  # fmt: skip
    parser.add_argument('--data-root', default=None)
    parser.add_argument('--out', required=True, help='a folder')
    args = parser.parse_args(argv)
    args.deep_scale = args.scale  # what conv.suite_graph reads
    os.makedirs(args.out, exist_ok=True)
    device = torch.device(args.device)
    data_root = copy_data(args.data_root) if args.data_root else None
    current = (tops.FORWARD_TILE, tops.BACKWARD_TILE)
    tiles = [(f, b) for f in args.forward_tiles for b in args.backward_tiles]
    if current not in tiles:
        tiles.append(current)
    rows = []
    try:
        for graph in args.graphs:
            x0, edge_index = suite_graph(graph, args, device, data_root)
            for heads in args.heads:
                for dtype_name in args.dtypes:
                    x = x0.to(DTYPES[dtype_name])
                    base, _ = time_step(
                        _Step(
                            make_layer('GATv2', x.size(1), args.hidden,
                                       heads, True).to(device, x.dtype),
                            x, edge_index,
                        ),
                        device, args.warmup, args.reps,
                    )  # fmt: skip
                    layer = make_layer(
                        'GATE', x.size(1), args.hidden, heads, True
                    ).to(device, x.dtype)
                    step = _Step(layer, x, edge_index, 'triton')
                    measured = {}
                    for forward, backward in tiles:
                        tops.FORWARD_TILE, tops.BACKWARD_TILE = (
                            forward,
                            backward,
                        )
                        measured[forward, backward] = time_step(
                            step, device, args.warmup, args.reps
                        )
                    now = measured[current][0]
                    for (forward, backward), (ms, peak) in measured.items():
                        rows.append(
                            [str(device), graph, edge_index.size(1), heads,
                             dtype_name, forward, backward, f'{ms:.3f}',
                             '' if peak is None else f'{peak / 2**20:.0f}',
                             f'{ms / base:.3f}', f'{ms / now:.3f}']
                        )  # fmt: skip
                    _write(rows, args, argv)
    finally:
        tops.FORWARD_TILE, tops.BACKWARD_TILE = current
        if data_root is not None:
            shutil.rmtree(data_root, ignore_errors=True)
    return rows


def _write(rows, args, argv):
    with open(os.path.join(args.out, 'triton_tune.csv'), 'w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(HEADER)
        writer.writerows(rows)
    lines = [
        '# Triton kernels: step time against the tiles',
        '',
        f'Command: `{command_line(argv, "benchmark/triton_tune.py")}`',
        '',
        machine_info(),
        '',
        '| ' + ' | '.join(HEADER) + ' |',
        '|' + ' --- |' * len(HEADER),
        *('| ' + ' | '.join(map(str, r)) + ' |' for r in rows),
    ]
    with open(os.path.join(args.out, 'triton_tune.md'), 'w') as f:
        f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
