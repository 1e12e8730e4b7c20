r"""Where a training step's time goes: GPU time per kernel next to wall time.

One training step (forward, :obj:`out.float().sum()`, backward) of GATE
with the Triton kernels and of eager GATv2Conv (the baseline, rerun in
every call) per graph, heads and dtype, after two warm-up steps: its wall
time (the median of ``--reps`` steps, synchronized before and after each),
the host syncs it makes (counted
with :func:`torch.cuda.set_sync_debug_mode`), and one step under
:mod:`torch.profiler` with CUDA activity: every GPU kernel's time, their
sum against the wall time (what is left is the host's: launches, Python,
waits), and the Triton forward kernel's rate on the bytes it must move
(``kernels.py``'s :func:`forward_bytes`) against the device's copy rate.
``profile.md`` has a row per step, ``profile-kernels.md`` a row per
kernel. On CPU (tests) the Triton kernels run under the interpreter and
the CPU operators stand in for the kernels::

    python benchmark/gpu_profile.py --graphs random-1e6 products-size \
        --heads 1 8 --dtypes float32 bfloat16 --out DIR
"""

import argparse
import os
import time
from collections import defaultdict

from cli import (
    DEVICE_HELP,
    DTYPE_NAMES,
    add_layer_args,
    check_devices,
    default_device,
    device_name,
    file_stem,
    fraction,
    parse_checked,
    positive_float,
)
from kernels import copy_gbs, fit_features, forward_bytes
from report import result_notes, write_results

COLUMNS = [
    'device', 'graph', 'num_nodes', 'num_edges', 'heads', 'dtype', 'layer',
    'kernel', 'status', 'wall_ms', 'gpu_ms', 'gpu_share', 'kernels',
    'syncs', 'fwd_kernel_ms', 'fwd_gbs', 'copy_gbs', 'top',
]  # fmt: skip
KERNEL_COLUMNS = [
    'device', 'graph', 'heads', 'dtype', 'layer', 'name', 'calls', 'gpu_ms',
    'share_of_gpu',
]  # fmt: skip
#: The Triton forward's kernels (either layout, and the merge of a split
#: node's segments), whose rate is measured against the copy rate.
FORWARD_KERNELS = ('gate_fwd_kernel', 'gate_fwd_1h_kernel',
                   'gate_combine_kernel')  # fmt: skip
#: On CPU, the rows of the operators that took longest, per step.
CPU_ROWS = 10


def forward_ms(per_kernel: dict) -> float:
    r"""The GPU milliseconds of the Triton forward's kernels
    (:data:`FORWARD_KERNELS`) among :obj:`{name: (calls, ms)}`."""
    return sum(
        ms
        for name, (_, ms) in per_kernel.items()
        if name.startswith(FORWARD_KERNELS)
    )


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add_layer_args(parser, ['random-1e6', 'products-size'], reps=1)
    parser.add_argument(
        '--dtypes', nargs='+', default=['float32'], choices=list(DTYPE_NAMES)
    )
    parser.add_argument(
        '--device',
        type=device_name,
        help=f'cpu, cuda or cuda:N ({DEVICE_HELP})',
    )
    parser.add_argument(
        '--scale', type=fraction, default=1.0, help='scales the sized graphs'
    )
    parser.add_argument(
        '--max-seconds', type=positive_float, default=1e9,
        help='skip the configurations left after this long',
    )  # fmt: skip
    parser.add_argument('--name', type=file_stem, default='profile')
    args = parse_checked(parser, argv)
    args.device = args.device or default_device()
    check_devices(parser, [args.device], '--device')
    return args


def _device_us(evt) -> float:
    r"""An event's own device time (microseconds), under either name torch
    has given it."""
    value = getattr(evt, 'self_device_time_total', None)
    if value is None:
        value = getattr(evt, 'self_cuda_time_total', 0)
    return float(value or 0)


def profile_step(step, device, reps: int = 1) -> dict:
    r"""Wall time (the median of :obj:`reps` calls), syncs, and the
    profiled kernels of one call of :obj:`step` (warmed up by the
    caller)."""
    import torch
    from common import cuda_syncs, sync, time_step
    from torch.profiler import ProfilerActivity, profile

    on_cuda = device.type == 'cuda'
    res = dict(syncs=cuda_syncs(step) if on_cuda else None)
    res['wall_ms'] = time_step(step, device, 0, reps)
    activities = [ProfilerActivity.CPU]
    if on_cuda:
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        step()
        sync(device)
    kernels = defaultdict(lambda: [0, 0.0])  # name -> [calls, ms]
    events = list(prof.key_averages())
    if on_cuda:
        gpu = [e for e in events
               if e.device_type == torch.autograd.DeviceType.CUDA]  # fmt: skip
        # (Should a profiler tag the kernels otherwise: the events that
        # took device time of their own.)
        events = gpu or [e for e in events if _device_us(e) > 0]
    for evt in events:
        if on_cuda:
            ms = _device_us(evt) / 1e3
        else:  # CPU: the operators' own time stands in for kernels.
            ms = evt.self_cpu_time_total / 1e3
        if ms > 0:
            kernels[evt.key][0] += evt.count
            kernels[evt.key][1] += ms
    total = sum(ms for _, ms in kernels.values())
    res.update(
        gpu_ms=total if on_cuda else None,
        gpu_share=total / res['wall_ms'] if on_cuda else None,
        kernels=sum(calls for calls, _ in kernels.values()),
        per_kernel=dict(kernels),
    )
    top = sorted(kernels.items(), key=lambda kv: -kv[1][1])[:6]
    res['top'] = '; '.join(f'{k[:48]} {ms:.3g}' for k, (_, ms) in top)
    return res


def main(argv=None):
    args = parse_args(argv)
    import torch
    from common import DTYPES, Step, free, load_graph, make_layer, status_of

    device = torch.device(args.device)
    started = time.perf_counter()
    stem = os.path.join(args.out, args.name)
    notes = result_notes('gpu_profile.py', argv, __doc__)
    rows, kernel_rows = [], []
    copy = copy_gbs(device) if device.type == 'cuda' else None

    def write():
        write_results(rows, stem, COLUMNS, 'Profile of a training step',
                      notes)  # fmt: skip
        write_results(
            kernel_rows, stem + '-kernels', KERNEL_COLUMNS,
            'Profile of a training step: GPU time per kernel', notes,
        )  # fmt: skip

    for graph in args.graphs:
        try:
            x0, edge_index = load_graph(
                graph, args.channels, device, args.data_root, args.scale
            )
            x0 = fit_features(x0, args.channels)
        except Exception as err:  # noqa: BLE001 (recorded)
            rows.append(dict(device=device.type, graph=graph,
                             status=f'no graph: {err}'[:200]))  # fmt: skip
            write()
            continue
        for heads in args.heads:
            for dtype in args.dtypes:
                x = x0.to(DTYPES[dtype])
                base = dict(
                    device=device.type, graph=graph, num_nodes=x.size(0),
                    num_edges=edge_index.size(1), heads=heads, dtype=dtype,
                )  # fmt: skip
                for layer, kernel in (('GATE', 'triton'), ('GATv2', 'eager')):
                    row = dict(base, layer=layer, kernel=kernel)
                    rows.append(row)
                    if time.perf_counter() - started > args.max_seconds:
                        row['status'] = 'skipped (time budget)'
                        write()
                        continue
                    try:
                        model = make_layer(layer, x.size(1), args.hidden,
                                           heads)  # fmt: skip
                        model = model.to(device, x.dtype)
                        step = Step(
                            model, x, edge_index,
                            kernel if layer == 'GATE' else None,
                        )  # fmt: skip
                        for _ in range(max(args.warmup, 1) + 1):
                            step()
                        got = profile_step(step, device, args.reps)
                        per_kernel = got.pop('per_kernel')
                        row.update(got, status='ok')
                        gpu = sum(ms for _, ms in per_kernel.values())
                        ranked = sorted(
                            per_kernel.items(), key=lambda kv: -kv[1][1]
                        )
                        if device.type != 'cuda':  # operators, not kernels
                            ranked = ranked[:CPU_ROWS]
                        for name, (calls, ms) in ranked:
                            kernel_rows.append(dict(
                                base, layer=layer, name=name[:80],
                                calls=calls, gpu_ms=ms,
                                share_of_gpu=ms / gpu if gpu else None,
                            ))  # fmt: skip
                        fwd = forward_ms(per_kernel)
                        if layer == 'GATE' and fwd and device.type == 'cuda':
                            n = x.size(0)
                            size = x.element_size()
                            channels = max(args.hidden // heads, 1)
                            nbytes = forward_bytes(
                                edge_index.size(1) + n, n, heads, channels,
                                size, size,
                            )  # fmt: skip
                            row.update(
                                fwd_kernel_ms=fwd,
                                fwd_gbs=nbytes / (fwd * 1e-3) / 1e9,
                                copy_gbs=copy,
                            )
                        del model, step
                    except Exception as err:  # noqa: BLE001 (recorded)
                        row['status'] = status_of(err)
                    free(device)
                    write()
                    print({k: row.get(k) for k in COLUMNS if k in row},
                          flush=True)  # fmt: skip
        del x0, edge_index
        free(device)
    return rows, kernel_rows


if __name__ == '__main__':
    main()
