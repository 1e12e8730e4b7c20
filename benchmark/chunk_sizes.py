r"""GATEConv's eager CPU training step at several chunk sizes of its chunked
kernels: which size of chunk is fastest for a number of threads (GATE's
eager calls run the chunked ATen loops here, not the compiled ones).

The chunked kernels walk the edges in chunks of ``chunk_elements`` edge
elements (edges times ``heads * out_channels``; an option of
``attention_kernel``, set here per intra-op thread).
For every graph and heads, GATE's step at each size (``--sizes``, powers of
two) and GATv2Conv's step run in alternation (A B C ..., A B C ..., so that
the drift of a shared machine cancels) after a warm-up; each size's median
milliseconds, and the median of its per-round ratios to the first size's
step and to GATv2Conv's. Run it once per thread count, on an otherwise idle
machine::

    python benchmark/chunk_sizes.py --graphs random-1e5 random-1e6 \
        --heads 1 8 --sizes 18 19 20 --threads 1 \
        --out benchmark/results --name cpu-chunk-sizes-1
"""

import argparse
import os
import statistics
from typing import Callable, Dict, List

from cli import add_layer_args, file_stem, int_at_least, parse_checked
from report import (
    result_notes,
    write_results,
)

COLUMNS = [
    'graph', 'num_nodes', 'num_edges', 'heads', 'threads', 'chunk_log2',
    'gate_ms', 'gatv2_ms', 'vs_first', 'vs_gatv2',
]  # fmt: skip


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add_layer_args(parser, ['random-1e5', 'random-1e6'], reps=7)
    parser.add_argument(
        '--sizes',
        nargs='+',
        type=int_at_least(4),
        default=[18, 19, 20],
        help='log2 of the chunk elements per thread; the ratios are to the '
        'first',
    )
    parser.add_argument('--name', type=file_stem, default='chunk-sizes')
    return parse_checked(parser, argv)


def _at_size(step: Callable[[], None], log2: int) -> Callable[[], None]:
    from common import cpu_chunk_log2

    def run():
        with cpu_chunk_log2(log2):
            step()

    return run


def measure(x, edge_index, heads: int, args) -> List[dict]:
    r"""One row per size: GATE's and GATv2Conv's median step and the
    ratios, timed in alternation."""
    from common import Step, make_layer, time_rounds

    gate = Step(make_layer('GATE', x.size(1), args.hidden, heads), x,
                edge_index)  # fmt: skip
    fns: Dict[str, Callable[[], None]] = {
        str(k): _at_size(gate, k) for k in args.sizes
    }
    fns['gatv2'] = Step(
        make_layer('GATv2', x.size(1), args.hidden, heads), x, edge_index
    )
    times = time_rounds(fns, 'cpu', args.warmup, args.reps)
    first, gatv2 = times[str(args.sizes[0])], times['gatv2']
    rows = []
    for k in args.sizes:
        t = times[str(k)]
        rows.append(dict(
            chunk_log2=k,
            gate_ms=statistics.median(t),
            gatv2_ms=statistics.median(gatv2),
            vs_first=statistics.median(a / b for a, b in zip(t, first)),
            vs_gatv2=statistics.median(a / b for a, b in zip(t, gatv2)),
        ))  # fmt: skip
    return rows


def main(argv=None) -> List[dict]:
    args = parse_args(argv)
    from common import cpu_graphs_and_heads, eager_loops

    stem = os.path.join(args.out, args.name)
    notes = result_notes('chunk_sizes.py', argv, __doc__)
    rows: List[dict] = []
    with eager_loops('chunks'):
        for x, edge_index, heads, config in cpu_graphs_and_heads(args):
            for row in measure(x, edge_index, heads, args):
                rows.append({**config, **row})
                print(rows[-1], flush=True)
            write_results(rows, stem, COLUMNS, 'Chunk sizes', notes)
    return rows


if __name__ == '__main__':
    main()
