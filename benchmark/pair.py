r"""GATEConv against PyG's GATv2Conv: step time and memory, eager and
compiled, as ratios from one run.

Both layers run at equal settings (:obj:`heads`, :obj:`concat`,
:obj:`hidden = heads * out_channels`, bias, self-loops, no shared weights),
each with its default negative slope; GATE has three weight matrices to
GATv2Conv's two. For every device, graph, heads, concat, eager or
:func:`torch.compile` and mode (:obj:`train`: forward and backward;
:obj:`forward`; :obj:`inference` under :func:`torch.no_grad`) the two
layers run alternately after a warm-up; *ratio* is the median of the
GATE/GATv2 ratios of the pairs. Memory of an eager training step: the bytes
saved for backward, on CUDA the peak allocated and the host syncs of a
forward, with :obj:`--rss` the peak resident size of a fresh process that
runs one step. Results are written after every configuration::

    python benchmark/pair.py --graphs random-1e5 random-1e6 cora \
        --heads 1 8 --out benchmark/results --name cpu-pair
"""

import argparse
import os

from cli import (
    LAYERS,
    add_layer_args,
    check_devices,
    device_name,
    file_stem,
    parse_checked,
)
from plotting import plot, plot_points
from report import (
    result_notes,
    write_results,
)

MODES = ('train', 'forward', 'inference')
COLUMNS = [
    'device', 'graph', 'num_nodes', 'num_edges', 'in_channels', 'heads',
    'concat', 'variant', 'mode', 'reps', 'gate_ms', 'gatv2_ms', 'ratio',
    'ratio_min', 'ratio_max', 'gate_first_s', 'gatv2_first_s',
    'gate_saved_mb', 'gatv2_saved_mb', 'saved_ratio', 'gate_rss_step_mb',
    'gatv2_rss_step_mb', 'gate_cuda_peak_mb', 'gatv2_cuda_peak_mb',
    'peak_ratio', 'gate_syncs', 'gatv2_syncs',
]  # fmt: skip


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add_layer_args(parser, ['random-1e4', 'random-1e5'], reps=10)
    parser.add_argument(
        '--concat', nargs='+', default=['true'], choices=['true', 'false']
    )
    parser.add_argument('--modes', nargs='+', default=['train'], choices=MODES)
    parser.add_argument(
        '--compile',
        nargs='+',
        default=['eager'],
        choices=['eager', 'compiled'],
    )
    parser.add_argument(
        '--devices',
        nargs='+',
        type=device_name,
        default=None,
        help='cpu, cuda or cuda:N (default: cpu, and cuda when available)',
    )
    parser.add_argument(
        '--rss',
        action='store_true',
        help='peak RSS of a fresh process per config (CPU)',
    )
    parser.add_argument(
        '--name',
        type=file_stem,
        default='pair',
        help='file name stem of the outputs',
    )
    parser.add_argument('--plot', action='store_true')
    args = parse_checked(parser, argv)
    check_devices(parser, args.devices or [])
    return args


def memory(models, x, edge_index, device, args, spec) -> dict:
    from common import Step, cuda_peak_bytes, cuda_syncs, saved_bytes
    from fresh_process import fresh_process_step

    res = {}
    for layer, model in models.items():
        k = layer.lower()
        step = Step(model, x, edge_index, mode='forward')
        res[f'{k}_saved_mb'] = saved_bytes(step) / 2**20
        if device.type == 'cuda':
            train = Step(model, x, edge_index)
            res[f'{k}_cuda_peak_mb'] = cuda_peak_bytes(train, device) / 2**20
            res[f'{k}_syncs'] = cuda_syncs(step)
        elif args.rss:
            got = fresh_process_step(dict(spec, layer=layer))
            res[f'{k}_rss_step_mb'] = got.get('step_mb')
    res['saved_ratio'] = res['gate_saved_mb'] / res['gatv2_saved_mb']
    if device.type == 'cuda':
        res['peak_ratio'] = (
            res['gate_cuda_peak_mb'] / res['gatv2_cuda_peak_mb']
        )
    return res


def main(argv=None):
    args = parse_args(argv)
    import torch
    from common import Step, load_graph, make_layer, time_pair

    devices = args.devices or ['cpu'] + ['cuda'] * torch.cuda.is_available()
    stem = os.path.join(args.out, args.name)
    notes = result_notes('pair.py', argv, __doc__)
    rows = []
    for device in map(torch.device, devices):
        for graph in args.graphs:
            x, edge_index = load_graph(graph, args.channels, device,
                                       args.data_root)  # fmt: skip
            for heads in args.heads:
                for concat in (c == 'true' for c in args.concat):
                    base = dict(
                        device=str(device), graph=graph, num_nodes=x.size(0),
                        num_edges=edge_index.size(1), in_channels=x.size(1),
                        heads=heads, concat=concat, reps=args.reps,
                    )  # fmt: skip
                    eager = {
                        k: make_layer(k, x.size(1), args.hidden, heads,
                                      concat).to(device)
                        for k in LAYERS
                    }  # fmt: skip
                    spec = dict(device=str(device), graph=graph,
                                channels=args.channels, hidden=args.hidden,
                                heads=heads, concat=concat,
                                threads=torch.get_num_threads(),
                                data_root=args.data_root)  # fmt: skip
                    mem = memory(eager, x, edge_index, device, args, spec)
                    for variant in args.compile:
                        models = eager
                        if variant == 'compiled':
                            models = {
                                k: torch.compile(m, fullgraph=k == 'GATE')
                                for k, m in eager.items()
                            }
                        for mode in args.modes:
                            steps = {
                                k.lower(): Step(m, x, edge_index, mode=mode)
                                for k, m in models.items()
                            }
                            row = dict(base, variant=variant, mode=mode)
                            row.update(time_pair(steps, device, args.warmup,
                                                 args.reps))  # fmt: skip
                            if variant == 'eager' and mode == 'train':
                                row.update(mem)
                            rows.append(row)
                            write_results(
                                rows,
                                stem,
                                COLUMNS,
                                'GATEConv vs GATv2Conv',
                                notes,
                            )
                            print(row, flush=True)  # fmt: skip
    if args.plot:
        plot(plot_points(rows), stem + '.png')
    return rows


if __name__ == '__main__':
    main()
