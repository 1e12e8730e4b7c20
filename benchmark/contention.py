r"""GATEConv against PyG's GATv2Conv on a CPU that another process is busy
on: how much slower each layer's training step gets.

For every graph and heads the two layers' training steps are timed in
alternation (as in :obj:`pair.py`) with torch's threads (:obj:`--threads`,
default torch's own choice), in :obj:`--rounds` rounds of two phases: one
on an otherwise idle machine, one while :obj:`--competitors` processes each
keep one core busy (a Python loop that never yields, started for the phase
and stopped after it). *slowdown* is a layer's median step time under
contention over its idle one; *relative* is GATE's slowdown over
GATv2Conv's, per round the ratio of the two phases' median GATE/GATv2Conv
ratios (at most 1: GATE suffers no more from the shared CPU), its median
over the rounds with their minimum and maximum (how a shared CPU's
scheduling scatters it). The machine must be otherwise idle for the
numbers to mean anything. GATE's eager calls run Inductor's compiled loops
where they apply; :obj:`--eager-loops chunks` runs the chunked ATen loops,
and :obj:`--chunk-log2` their chunk size (edge elements per intra-op
thread, as in :obj:`chunk_sizes.py`)::

    python benchmark/contention.py --graphs cora random-1e5 --heads 1 8 \
        --out benchmark/results --name cpu-contention
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

from cli import (
    EAGER_LOOPS,
    LAYERS,
    add_layer_args,
    file_stem,
    int_at_least,
    parse_checked,
)
from report import (
    result_notes,
    write_results,
)

COLUMNS = [
    'graph', 'num_nodes', 'num_edges', 'heads', 'threads', 'eager_loops',
    'chunk_log2', 'competitors',
    'gate_idle_ms', 'gatv2_idle_ms', 'gate_busy_ms', 'gatv2_busy_ms',
    'gate_slowdown', 'gatv2_slowdown', 'rounds', 'relative', 'relative_min',
    'relative_max', 'idle_ratio', 'busy_ratio',
]  # fmt: skip
# One core kept busy without ever waiting (no sleep, no I/O):
SPIN = 'while True: pass'


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add_layer_args(parser, ['cora', 'random-1e5'], reps=7, warmup=2)
    parser.add_argument(
        '--competitors',
        type=int_at_least(1),
        default=1,
        help='processes that each keep one core busy',
    )
    parser.add_argument(
        '--rounds',
        type=int_at_least(1),
        default=3,
        help='idle and busy phases, alternated',
    )
    parser.add_argument(
        '--eager-loops',
        choices=EAGER_LOOPS,
        default='compiled',
        help="what GATE's eager CPU calls run: Inductor's compiled loops "
        '(the default) or the chunked ATen loops',
    )
    parser.add_argument(
        '--chunk-log2',
        type=int_at_least(4),
        default=None,
        help="log2 of GATE's chunk elements per thread (default: the "
        "kernels' own), with --eager-loops chunks",
    )
    parser.add_argument('--name', type=file_stem, default='contention')
    args = parse_checked(parser, argv)
    if args.chunk_log2 is not None and args.eager_loops != 'chunks':
        parser.error('--chunk-log2 sizes the chunks: add --eager-loops chunks')
    return args


class Competitors:
    r"""Starts :obj:`n` processes that each spin on one core; stops them on
    exit."""

    def __init__(self, n: int):
        self.n, self.procs = n, []

    def __enter__(self):
        self.procs = [
            subprocess.Popen([sys.executable, '-c', SPIN])
            for _ in range(self.n)
        ]
        time.sleep(0.5)  # let them start spinning
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait()


def measure(x, edge_index, heads, args) -> dict:
    import torch
    from common import Step, make_layer, time_pair

    steps = {
        k.lower(): Step(
            make_layer(k, x.size(1), args.hidden, heads), x, edge_index
        )
        for k in LAYERS
    }
    cpu = torch.device('cpu')
    phases = {'idle': [], 'busy': []}
    for _ in range(args.rounds):
        phases['idle'].append(time_pair(steps, cpu, args.warmup, args.reps))
        with Competitors(args.competitors):
            phases['busy'].append(
                time_pair(steps, cpu, args.warmup, args.reps)
            )
    row = {'rounds': args.rounds}
    for phase, pairs in phases.items():
        for k in ('gate', 'gatv2'):
            row[f'{k}_{phase}_ms'] = statistics.median(
                p[f'{k}_ms'] for p in pairs
            )
        row[f'{phase}_ratio'] = statistics.median(p['ratio'] for p in pairs)
    for k in ('gate', 'gatv2'):
        row[f'{k}_slowdown'] = row[f'{k}_busy_ms'] / row[f'{k}_idle_ms']
    relative = [
        busy['ratio'] / idle['ratio']
        for idle, busy in zip(phases['idle'], phases['busy'])
    ]
    row['relative'] = statistics.median(relative)
    row['relative_min'], row['relative_max'] = min(relative), max(relative)
    return row


def main(argv=None):
    args = parse_args(argv)
    from common import cpu_chunk_log2, cpu_graphs_and_heads, eager_loops

    stem = os.path.join(args.out, args.name)
    notes = result_notes('contention.py', argv, __doc__)
    rows = []
    with (
        eager_loops(args.eager_loops) as loops,
        cpu_chunk_log2(args.chunk_log2) as log2,
    ):
        for x, edge_index, heads, config in cpu_graphs_and_heads(args):
            row = dict(config, eager_loops=loops, competitors=args.competitors)
            row['chunk_log2'] = log2 if loops == 'chunks' else None
            row.update(measure(x, edge_index, heads, args))
            rows.append(row)
            write_results(rows, stem, COLUMNS, 'Under contention', notes)
            print(row, flush=True)
    return rows


if __name__ == '__main__':
    main()
