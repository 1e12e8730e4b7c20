r"""GATE's attention kernels against GATv2Conv: training step and memory.

GATE under each attention kernel (reference, chunked, Triton) and
GATv2Conv (eager, and compiled with :func:`torch.compile`) run one training
step (forward, :obj:`out.float().sum()`, backward) on each graph, heads and
dtype: the median time of the repetitions (CUDA events on CUDA), the peak
allocated on CUDA during a step above what was allocated before it (the
inputs, the weights and the previous step's gradients), the bytes saved for
backward (eager), each as a ratio over GATv2Conv of the same graph, heads
and dtype. With the Triton kernels on CUDA, the forward kernel alone (under
:func:`torch.no_grad`, no attention weights) against the bytes it must move
gives its bandwidth, next to the device's copy bandwidth. Written after
every configuration; configurations past :obj:`--max-seconds` are recorded
as skipped::

    python benchmark/kernels.py --devices cuda --graphs products-size \
        arxiv-size random-1e6 cora --heads 1 8 --dtypes float32 bfloat16
"""

import argparse
import itertools
import os
import time

from cli import (
    DEVICE_HELP,
    DTYPE_NAMES,
    GATE_KERNELS,
    add_layer_args,
    check_devices,
    default_device,
    device_name,
    file_stem,
    fraction,
    parse_checked,
    positive_float,
)
from plotting import plot, plot_points
from report import (
    result_notes,
    write_results,
)

COLUMNS = [
    'device', 'graph', 'input', 'num_nodes', 'num_edges', 'heads', 'hidden',
    'dtype',
    'layer', 'kernel', 'status', 'reps', 'step_ms', 'ns_per_edge', 'peak_mb',
    'saved_mb', 'time_vs_gatv2_eager', 'time_vs_gatv2_compiled',
    'peak_vs_gatv2_eager', 'peak_vs_gatv2_compiled', 'saved_vs_gatv2_eager',
    'fwd_kernel_ms', 'fwd_bytes', 'fwd_gbs', 'copy_gbs',
]  # fmt: skip


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add_layer_args(
        parser,
        ['arxiv-size', 'random-1e6', 'random-1e5'],
        channels_help='input features (real graphs: cut or padded)',
    )
    parser.add_argument(
        '--dtypes', nargs='+', default=['float32'], choices=list(DTYPE_NAMES)
    )
    parser.add_argument(
        '--kernels',
        nargs='+',
        default=list(GATE_KERNELS),
        choices=GATE_KERNELS,
        help="GATE's attention kernels",
    )
    parser.add_argument(
        '--gate-compiled',
        action='store_true',
        help="also each of GATE's kernels under torch.compile (rows "
        "'<kernel>-compiled')",
    )
    parser.add_argument(
        '--gatv2',
        nargs='+',
        default=['eager'],
        choices=['eager', 'compiled', 'none'],
        help='GATv2Conv eager and/or compiled (Inductor '
        'compiles for 30-60 s per heads and dtype)',
    )
    parser.add_argument(
        '--devices',
        nargs='+',
        type=device_name,
        help=f'cpu, cuda or cuda:N ({DEVICE_HELP})',
    )
    parser.add_argument(
        '--scale',
        type=fraction,
        default=1.0,
        help='scales the sized graphs, in (0, 1] (tests)',
    )
    parser.add_argument(
        '--max-seconds',
        type=positive_float,
        default=1e9,
        help='skip the configurations left after this long',
    )
    parser.add_argument(
        '--inputs', nargs='+', default=['plain'],
        choices=['plain', 'edge-index'],
        help="the edges as a plain tensor and/or a column-sorted EdgeIndex "
        "(whose cached CSC gives GATE's Triton kernels their CSR)",
    )  # fmt: skip
    parser.add_argument('--name', type=file_stem, default='kernels')
    parser.add_argument('--plot', action='store_true')
    args = parse_checked(parser, argv)
    args.devices = args.devices or [default_device()]
    check_devices(parser, args.devices)
    return args


def forward_bytes(num_edges, num_dst, heads, channels, itemsize, out_size):
    r"""The bytes the Triton forward moves (no edge features, no dropout, no
    attention weights): per edge its int32 source and int8 kind (5 bytes)
    and the rows :math:`\mathbf{U}\mathbf{x}_u` (:obj:`q_src`) and
    :math:`\mathbf{W}\mathbf{x}_u` (:obj:`value`) of its source; per target
    node four int32 pointers (16), :obj:`q_dst`'s row, :obj:`out`'s written
    row and the float32 log-sum-exp per head:
    :math:`E (5 + 2HCb) + N (16 + HCb + HCb_{out} + 4H)`.
    """
    row = heads * channels
    return num_edges * (5 + 2 * row * itemsize) + num_dst * (
        16 + row * itemsize + row * out_size + 4 * heads
    )


def forward_bandwidth(edge_index, num_nodes, heads, hidden, dtype, device,
                      reps) -> dict:  # fmt: skip
    r"""The Triton forward alone on inputs of the layer's shapes (self-loops
    appended, no dropout, no attention weights): its time, the bytes of
    :func:`forward_bytes` and their rate. The edges are a column-sorted
    :class:`EdgeIndex` whose CSR is built once, before the timed calls (a
    plain tensor is sorted in every call)."""
    import torch
    from common import time_step
    from torch_geometric import EdgeIndex

    from torch_geometric_gate.ops import attention_kernel, gate_attention

    n, channels = num_nodes, max(hidden // heads, 1)
    loops = torch.arange(n, device=device)
    is_loop = torch.cat(
        [
            torch.zeros_like(edge_index[0], dtype=torch.bool),
            torch.ones(n, dtype=torch.bool, device=device),
        ]
    )
    edges = torch.stack(
        [torch.cat([edge_index[0], loops]), torch.cat([edge_index[1], loops])]
    )
    edges, perm = EdgeIndex(edges, sparse_size=(n, n)).sort_by('col')
    edges.get_csc()
    is_loop = is_loop[perm]
    gen = torch.Generator(device=device).manual_seed(0)
    q_src, q_dst, value, a_s, a_t = (
        torch.randn(size, heads, channels, generator=gen, device=device).to(
            dtype
        )
        for size in (n, n, n, 1, 1)
    )

    def run():
        with torch.no_grad(), attention_kernel('triton'):
            gate_attention(q_src, q_dst, value, edges, a_s, a_t, loop=is_loop)

    ms = time_step(run, device, 1, reps)
    size = torch.finfo(dtype).bits // 8
    nbytes = forward_bytes(edges.size(1), n, heads, channels, size, size)
    return dict(fwd_kernel_ms=ms, fwd_bytes=nbytes,
                fwd_gbs=nbytes / (ms * 1e-3) / 1e9)  # fmt: skip


def copy_gbs(device, nbytes=2**30, reps=10) -> float:
    r"""The device's copy rate (GB/s, read and write), the yardstick."""
    import torch
    from common import time_step

    a = torch.empty(nbytes, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    return (
        2
        * nbytes
        / (time_step(lambda: b.copy_(a), device, 2, reps) * 1e-3)
        / 1e9
    )


def fit_features(x, channels):
    r"""A real graph's features cut or zero-padded to :obj:`channels`, so
    that one compiled GATv2Conv per heads and dtype serves every graph."""
    import torch

    x = x[:, :channels]
    return torch.nn.functional.pad(x, (0, channels - x.size(1)))


def measure(layer, kernel, x, edge_index, heads, device, args, compiled):
    import torch
    from common import (
        Step,
        cuda_peak_bytes,
        make_layer,
        saved_bytes,
        time_step,
    )

    model = make_layer(layer, x.size(1), args.hidden, heads)
    model = model.to(device, x.dtype)
    warmup = args.warmup
    # 'compiled' (GATv2Conv) or '<GATE kernel>-compiled':
    is_compiled = kernel == 'compiled' or kernel.endswith('-compiled')
    attention = kernel.removesuffix('-compiled') if layer == 'GATE' else None
    if is_compiled:
        key = (layer, attention, heads, x.dtype, device.type)
        if key not in compiled:
            compiled[key] = torch.compile(model, dynamic=True)
        else:  # Same weights' shapes: the compiled code is reused.
            compiled[key]._orig_mod.load_state_dict(model.state_dict())
        model, warmup = compiled[key], max(warmup, 2)
    step = Step(model, x, edge_index, attention)
    res = dict(reps=args.reps)
    if device.type == 'cuda':
        step()
        torch.cuda.synchronize(device)
        res['peak_mb'] = cuda_peak_bytes(step, device) / 2**20
    res['step_ms'] = time_step(step, device, warmup, args.reps)
    res['ns_per_edge'] = 1e6 * res['step_ms'] / edge_index.size(1)
    if not is_compiled:  # Compiled code saves inside its own graph.
        step.mode = 'forward'
        res['saved_mb'] = saved_bytes(step) / 2**20
    return res


def ratios(rows):
    r"""Each row's time and peak over GATv2Conv's (eager and compiled) of the
    same device, graph, heads and dtype; its saved bytes over eager's."""
    ref = {
        (r['device'], r['graph'], r.get('input'), r['heads'], r['dtype'],
         r['kernel']): r
        for r in rows
        if r['layer'] == 'GATv2' and r.get('status') == 'ok'
    }  # fmt: skip
    for r in rows:
        for variant in ('eager', 'compiled'):
            other = ref.get((r['device'], r['graph'], r.get('input'),
                             r['heads'], r['dtype'], variant))  # fmt: skip
            if other is None or r.get('status') != 'ok':
                continue
            for key, name in (('step_ms', 'time'), ('peak_mb', 'peak'),
                              ('saved_mb', 'saved')):  # fmt: skip
                if r.get(key) and other.get(key):
                    r[f'{name}_vs_gatv2_{variant}'] = r[key] / other[key]


def _edges(edge_index, num_nodes, kind):
    r"""The edges as the step takes them: the plain tensor, or a
    column-sorted :class:`torch_geometric.EdgeIndex` (sorted here, once per
    graph, as a data pipeline would)."""
    if kind == 'plain':
        return edge_index
    from torch_geometric import EdgeIndex

    ei = EdgeIndex(edge_index, sparse_size=(num_nodes, num_nodes))
    return ei.sort_by('col')[0]


def main(argv=None):
    args = parse_args(argv)
    import torch
    from common import DTYPES, free, load_graph, status_of

    started = time.perf_counter()
    stem = os.path.join(args.out, args.name)
    notes = result_notes('kernels.py', argv, __doc__)
    variants = [('GATE', k) for k in args.kernels]
    if args.gate_compiled:
        variants += [('GATE', f'{k}-compiled') for k in args.kernels]
    variants += [('GATv2', v) for v in args.gatv2 if v != 'none']
    interpret = os.environ.get('TRITON_INTERPRET') == '1'
    rows, compiled = [], {}

    def write():
        ratios(rows)
        write_results(rows, stem, COLUMNS, 'GATE kernels vs GATv2Conv', notes)

    for device in map(torch.device, args.devices):
        copy = copy_gbs(device) if device.type == 'cuda' else None
        for graph in args.graphs:
            try:
                x0, edge_index = load_graph(
                    graph, args.channels, device, args.data_root, args.scale
                )
                x0 = fit_features(x0, args.channels)  # fmt: skip
            except Exception as err:  # noqa: BLE001 (recorded)
                rows.append(
                    dict(
                        device=str(device),
                        graph=graph,
                        layer='-',
                        kernel='-',
                        heads='-',
                        dtype='-',
                        status=f'no graph: {err}'[:200],
                    )
                )
                write()  # fmt: skip
                continue
            for heads, dtype, kind in itertools.product(
                args.heads, args.dtypes, args.inputs
            ):
                x = x0.to(DTYPES[dtype])
                edges = _edges(edge_index, x.size(0), kind)
                base = dict(
                    device=str(device), graph=graph, input=kind,
                    num_nodes=x.size(0), num_edges=edge_index.size(1),
                    heads=heads, hidden=args.hidden, dtype=dtype,
                )  # fmt: skip
                for layer, kernel in variants:
                    row = dict(base, layer=layer, kernel=kernel)
                    rows.append(row)
                    if time.perf_counter() - started > args.max_seconds:
                        row['status'] = 'skipped (time budget)'
                    elif (kernel.startswith('triton')
                          and device.type != 'cuda'
                          and not interpret):  # fmt: skip
                        row['status'] = 'skipped (needs CUDA)'
                    else:
                        try:
                            row.update(measure(layer, kernel, x,
                                               edges, heads, device,
                                               args, compiled),
                                       status='ok')  # fmt: skip
                            if kernel == 'triton' and kind == 'plain':
                                row.update(forward_bandwidth(
                                    edge_index, x.size(0), heads,
                                    args.hidden, DTYPES[dtype], device,
                                    args.reps,
                                ), copy_gbs=copy)  # fmt: skip
                        except Exception as err:  # noqa: BLE001
                            row['status'] = status_of(err)
                        free(device)
                    write()
                    print({k: row.get(k) for k in COLUMNS if k in row},
                          flush=True)  # fmt: skip
            del x0, edge_index
            free(device)
    if args.plot:
        plot(plot_points(rows), stem + '.png')
    return rows


if __name__ == '__main__':
    main()
