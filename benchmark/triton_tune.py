r"""Tunes the Triton kernels' edge blocks on a GPU: the training step of
:class:`GATEConv` under ``attention_kernel('triton')`` for each pair of
tile sizes (the switch's options ``triton_forward_tile`` and
``triton_backward_tile``: float32 per ``[BLOCK_E, H, C]`` tile, from which
each kernel's edge block follows), next to eager :class:`GATv2Conv` in the
same run, on the graphs, heads and dtypes given. It writes
``triton_tune.csv`` and ``triton_tune.md`` (step time, peak memory on
CUDA, and the ratio to GATv2Conv and to the default tiles), so that the
defaults can be set from what was measured. A fixed table, not Triton's
autotuner: the block changes the order of the softmax's sums, and a choice
timed afresh in every process would make results differ between runs::

    python benchmark/triton_tune.py --graphs random-1e6 arxiv-size \
        --heads 1 8 --dtypes float32 bfloat16 --out gpu-out/tune
"""

import argparse
import os

from cli import (
    DTYPE_NAMES,
    add_shape_args,
    check_devices,
    device_name,
    fraction,
    int_at_least,
    parse_checked,
)

COLUMNS = ['device', 'graph', 'edges', 'heads', 'dtype', 'forward_tile',
           'backward_tile', 'step_ms', 'peak_mb', 'x_gatv2conv',
           'x_current_tiles']  # fmt: skip


def _measure(step, device, args) -> tuple:
    from common import cuda_peak_bytes, time_step

    ms = time_step(step, device, args.warmup, args.reps)
    peak = cuda_peak_bytes(step, device) if device.type == 'cuda' else None
    return ms, peak


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(
            "Tunes the Triton kernels' edge blocks on a GPU: the training "
            "step of GATEConv under attention_kernel('triton') for each "
            'pair of tile sizes, next to GATv2Conv, written to '
            'triton_tune.csv and triton_tune.md.'
        )
    )
    parser.add_argument(
        '--device',
        type=device_name,
        default='cuda',
        help='cpu, cuda or cuda:N',
    )
    add_shape_args(parser, ['random-1e6'])
    parser.add_argument(
        '--dtypes', nargs='+', default=['float32'],
        choices=list(DTYPE_NAMES),
    )  # fmt: skip
    parser.add_argument(
        '--forward-tiles', type=int, nargs='+', default=[1024, 2048, 4096]
    )
    parser.add_argument(
        '--backward-tiles', type=int, nargs='+', default=[1024, 2048, 4096]
    )
    parser.add_argument('--warmup', type=int_at_least(0), default=1)
    parser.add_argument('--reps', type=int_at_least(1), default=5)
    parser.add_argument(
        '--scale', type=fraction, default=1.0,
        help='scales the sized graphs (tests: tiny graphs on a CPU)',
    )  # fmt: skip
    parser.add_argument(
        '--data-root',
        help="the real graphs' folder (default: $GATE_DATA_ROOT or data)",
    )
    parser.add_argument('--out', required=True, help='a folder')
    args = parse_checked(parser, argv)
    check_devices(parser, [args.device], '--device')
    from torch_geometric_gate.ops import attention_kernel

    for forward in args.forward_tiles:  # The switch checks them:
        for backward in args.backward_tiles:
            try:
                attention_kernel(
                    triton_forward_tile=forward, triton_backward_tile=backward
                )
            except ValueError as err:
                parser.error(str(err))
    return args


def main(argv=None):
    args = parse_args(argv)
    import torch
    from common import DTYPES, Step, load_graph, make_layer
    from report import result_notes, write_results

    from torch_geometric_gate.ops import attention_kernel, current_settings

    device = torch.device(args.device)
    default = current_settings()
    current = (default.triton_forward_tile, default.triton_backward_tile)
    tiles = [(f, b) for f in args.forward_tiles for b in args.backward_tiles]
    if current not in tiles:
        tiles.append(current)
    stem = os.path.join(args.out, 'triton_tune')
    notes = result_notes('triton_tune.py', argv)
    rows = []
    for graph in args.graphs:
        x0, edge_index = load_graph(
            graph, args.channels, device, args.data_root, args.scale
        )
        for heads in args.heads:
            for dtype_name in args.dtypes:
                x = x0.to(DTYPES[dtype_name])
                gatv2 = make_layer('GATv2', x.size(1), args.hidden, heads)
                base, _ = _measure(
                    Step(gatv2.to(device, x.dtype), x, edge_index),
                    device, args,
                )  # fmt: skip
                where = f'{graph} heads={heads} {dtype_name}'
                print(f'{where} GATv2Conv: {base:.4g} ms', flush=True)
                layer = make_layer('GATE', x.size(1), args.hidden, heads)
                step = Step(layer.to(device, x.dtype), x, edge_index, 'triton')
                measured = {}
                for forward, backward in tiles:
                    with attention_kernel(
                        triton_forward_tile=forward,
                        triton_backward_tile=backward,
                    ):
                        measured[forward, backward] = _measure(
                            step, device, args
                        )
                    print(
                        f'{where} GATE tiles {forward}/{backward}: '
                        f'{measured[forward, backward][0]:.4g} ms',
                        flush=True,
                    )
                now = measured[current][0]
                for (forward, backward), (ms, peak) in measured.items():
                    rows.append(dict(
                        device=str(device), graph=graph,
                        edges=edge_index.size(1), heads=heads,
                        dtype=dtype_name, forward_tile=forward,
                        backward_tile=backward, step_ms=ms,
                        peak_mb=None if peak is None else peak / 2**20,
                        x_gatv2conv=ms / base, x_current_tiles=ms / now,
                    ))  # fmt: skip
                write_results(
                    rows, stem, COLUMNS,
                    'Triton kernels: step time against the tiles', notes,
                )  # fmt: skip
    return rows


if __name__ == '__main__':
    main()
