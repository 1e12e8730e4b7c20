r"""How fast could a compiled GATEConv training step be? Its parts, timed.

Issue 16 asks for a compiled GATE training step of at most 0.6x compiled
GATv2Conv's. This script measures, in one run and on one thread, the
compiled step of both layers (alternately, as ``benchmark/conv.py``) and the
parts of a GATE step that an exact implementation on top of PyTorch's
operators has to run, each in the fastest form found for it:

* *GEMMs*: the three projections :math:`\mathbf{W}, \mathbf{U},
  \mathbf{V}` of the nodes and their weight gradients, as one fused GEMM or
  three (the faster of the two);
* *segment max*: the per-target maximum of the :math:`[E, H]` scores that the
  softmax needs, as ATen's ``scatter_reduce_`` with ``amax`` (Inductor has no
  lowering for it, so compiled code calls this);
* *edge passes*: the :math:`[E, H \cdot C]` passes, each compiled on its own
  by Inductor in the flat layout (which measured faster than
  :math:`[E, H, C]`): the score (gathers, activation, per-head dot product),
  the weighted aggregation, the score's backward (its two scatters and the
  attention vectors' gradient, as a scatter into per-target rows) and the
  aggregation's backward (the attention's gradient and the values' scatter).

Two more columns time the gradient of :math:`\mathbf{a}_s` and
:math:`\mathbf{a}_t` alone in its two forms: summed over the edges (what
autograd derives when one vector is broadcast to every edge; compiled, one
pass over the edges per 8 channels) and scattered into per-target rows,
then summed over the nodes (what GATEConv's compiled backward does).

Their sum (*parts*) leaves out the softmax's :math:`[E, H]` passes, the
bias, and every launch and allocation; with Inductor's kernels a compiled
GATE step is unlikely to get below it, although it is no proof (a better
form of a part would lower it). ``parts / GATv2`` is that sum over the
compiled GATv2Conv step. Run from the repository root::

    OMP_NUM_THREADS=1 python benchmark/compile_parts.py \
        --graphs random-1e5 random-1e6 tolokers --heads 1 8
"""

import argparse
import os
import statistics
import sys
import time
import warnings
from functools import partial
from typing import Callable, Dict, List

import torch
from torch import Tensor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conv import (  # noqa: E402
    DEFAULT_DATA,
    LAYERS,
    copy_data,
    load_graph,
    machine_info,
    make_layer,
    measure_pair,
)


def median_ms(fn: Callable[[], object], reps: int) -> float:
    fn()
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def _spread(t: Tensor, channels: int) -> Tensor:
    r"""``[E, H]`` to ``[E, H * C]``: each head's value over its channels."""
    num_rows, heads = t.shape
    return (
        t.unsqueeze(-1).expand(num_rows, heads, channels).reshape(num_rows, -1)
    )


def score(q_src, q_dst, src, dst, mask, att_n, att_s, heads: int):
    z = torch.relu(q_src[src] + q_dst[dst])
    att = torch.where(mask.view(-1, 1), att_s, att_n)
    return (z * att).view(z.size(0), heads, -1).sum(-1)


def att_grad_summed(q_src, q_dst, src, dst, mask, g):
    r"""The gradients of :math:`\mathbf{a}_s` and :math:`\mathbf{a}_t` as a
    reduction over the edges, the form autograd derives when one vector is
    broadcast to every edge (compiled: one pass over the edges per 8
    channels).
    """
    z = torch.relu(q_src[src] + q_dst[dst]) * _spread(
        g, q_src.size(1) // g.size(1)
    )
    m = mask.view(-1, 1)
    return torch.where(m, 0.0, z).sum(0), torch.where(m, z, 0.0).sum(0)


def att_grad_scattered(q_src, q_dst, src, dst, mask, g):
    r"""The same gradients as a scatter into per-target rows and a sum over
    nodes, the form of GATEConv's compiled backward.
    """
    num_dst = q_dst.size(0)
    z = torch.relu(q_src[src] + q_dst[dst]) * _spread(
        g, q_src.size(1) // g.size(1)
    )
    rows = dst + num_dst * mask.to(dst.dtype)
    out = q_dst.new_zeros(2 * num_dst, q_dst.size(1)).index_add_(0, rows, z)
    return out.view(2, num_dst, -1).sum(1).unbind(0)


def score_backward(q_src, q_dst, src, dst, mask, att_n, att_s, g):
    r"""The score's backward: the scatters into both node projections and
    the attention vectors' gradients (as GATEConv computes them).
    """
    z = q_src[src] + q_dst[dst]
    g_z = torch.where(
        z > 0,
        torch.where(mask.view(-1, 1), att_s, att_n)
        * _spread(g, q_src.size(1) // g.size(1)),
        0.0,
    )
    grad_src = torch.zeros_like(q_src).index_add_(0, src, g_z)
    grad_dst = torch.zeros_like(q_dst).index_add_(0, dst, g_z)
    grad_neighbor, grad_self = att_grad_scattered(
        q_src, q_dst, src, dst, mask, g
    )
    return grad_src, grad_dst, grad_neighbor, grad_self


def aggregate(value, alpha, src, dst):
    channels = value.size(1) // alpha.size(1)
    msg = value[src] * _spread(alpha, channels)
    return torch.zeros_like(value).index_add_(0, dst, msg)


def aggregate_backward(value, alpha, src, dst, grad_out):
    heads = alpha.size(1)
    g = grad_out[dst]
    grad_alpha = (g * value[src]).view(g.size(0), heads, -1).sum(-1)
    msg = g * _spread(alpha, value.size(1) // heads)
    grad_value = torch.zeros_like(value).index_add_(0, src, msg)
    return grad_alpha, grad_value


def measure(graph: str, heads: int, args) -> Dict[str, float]:
    x, edge_index = load_graph(graph, args.channels, args.data_root)
    num_nodes, features = x.shape
    width = args.hidden
    # The edges GATE attends over: the input's and one self-loop per node.
    loops = torch.arange(num_nodes)
    src = torch.cat([edge_index[0], loops])
    dst = torch.cat([edge_index[1], loops])
    mask = src == dst
    num_edges = src.numel()

    row = {'graph': graph, 'heads': heads, 'edges': edge_index.size(1)}

    # The compiled steps, alternately (as benchmark/conv.py times them):
    models = {
        k: torch.compile(
            make_layer(k, features, width, heads, True), fullgraph=k == 'GATE'
        )
        for k in LAYERS
    }
    pair = measure_pair(
        models,
        x,
        edge_index,
        'train',
        x.device,
        argparse.Namespace(warmup=2, reps=args.reps),
    )
    row['gatv2_ms'], row['gate_ms'] = pair['gatv2_ms'], pair['gate_ms']

    # GEMMs: forward projections and weight gradients, fused or not.
    weights = [torch.randn(width, features) for _ in range(3)]
    grad = torch.randn(num_nodes, 3 * width)
    grads = grad.split(width, dim=1)

    def three():
        [x @ w.t() for w in weights]
        [g.t() @ x for g in grads]

    def fused():
        x @ torch.cat(weights).t()
        grad.t() @ x

    row['gemm_ms'] = min(
        median_ms(three, args.reps), median_ms(fused, args.reps)
    )

    # Segment max, as compiled code gets it:
    e = torch.randn(num_edges, heads)
    index = dst.view(-1, 1).expand_as(e)

    def segment_max():
        out = e.new_zeros(num_nodes, heads)
        out.scatter_reduce_(0, index, e, 'amax', include_self=False)

    row['max_ms'] = median_ms(segment_max, args.reps)

    # Edge passes, each compiled by Inductor on its own:
    q_src, q_dst, value, grad_out = torch.randn(4, num_nodes, width)
    att_n, att_s = torch.randn(2, width)
    alpha = torch.rand(num_edges, heads)
    g = torch.randn(num_edges, heads)
    passes = {
        'score': (score, (q_src, q_dst, src, dst, mask, att_n, att_s, heads)),
        'aggregate': (aggregate, (value, alpha, src, dst)),
        'score_backward': (
            score_backward,
            (q_src, q_dst, src, dst, mask, att_n, att_s, g),
        ),
        'aggregate_backward': (
            aggregate_backward,
            (value, alpha, src, dst, grad_out),
        ),
    }
    att_inputs = (q_src, q_dst, src, dst, mask, g)
    for name, fn in (
        ('att_summed', att_grad_summed),
        ('att_scattered', att_grad_scattered),
    ):
        compiled = torch.compile(fn, fullgraph=True, dynamic=False)
        row[f'{name}_ms'] = median_ms(
            partial(compiled, *att_inputs), args.reps
        )
    for name, (fn, inputs) in passes.items():
        compiled = torch.compile(fn, fullgraph=True, dynamic=False)
        row[f'{name}_ms'] = median_ms(partial(compiled, *inputs), args.reps)
    row['edges_ms'] = sum(row[f'{name}_ms'] for name in passes)

    row['parts_ms'] = row['gemm_ms'] + row['max_ms'] + row['edges_ms']
    row['parts_ratio'] = row['parts_ms'] / row['gatv2_ms']
    row['target_ms'] = 0.6 * row['gatv2_ms']
    return row


COLUMNS = [
    ('graph', 'graph', '{}'),
    ('edges', 'edges', '{}'),
    ('heads', 'heads', '{}'),
    ('compiled GATv2 ms', 'gatv2_ms', '{:.1f}'),
    ('compiled GATE ms', 'gate_ms', '{:.1f}'),
    ('goal: 0.6x GATv2 ms', 'target_ms', '{:.1f}'),
    ('GEMMs ms', 'gemm_ms', '{:.1f}'),
    ('segment max ms', 'max_ms', '{:.1f}'),
    ('score ms', 'score_ms', '{:.1f}'),
    ('aggregate ms', 'aggregate_ms', '{:.1f}'),
    ('score backward ms', 'score_backward_ms', '{:.1f}'),
    ('aggregate backward ms', 'aggregate_backward_ms', '{:.1f}'),
    ('parts ms', 'parts_ms', '{:.1f}'),
    ('parts / GATv2', 'parts_ratio', '{:.2f}'),
    ('a_s/a_t gradient, summed over edges ms', 'att_summed_ms', '{:.1f}'),
    ('a_s/a_t gradient, scattered ms', 'att_scattered_ms', '{:.1f}'),
]


def markdown(rows: List[dict], argv) -> str:
    command = ' '.join(['python', 'benchmark/compile_parts.py', *argv])
    lines = [
        '# The parts of a compiled GATEConv training step',
        '',
        f'Command: `{command}`',
        '',
        machine_info(),
        '',
        '| ' + ' | '.join(c[0] for c in COLUMNS) + ' |',
        '|' + '---|' * len(COLUMNS),
    ]
    for r in rows:
        cells = [fmt.format(r[key]) for _, key, fmt in COLUMNS]
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--graphs', nargs='+', default=['random-1e5'])
    parser.add_argument('--heads', nargs='+', type=int, default=[1, 8])
    parser.add_argument('--channels', type=int, default=128)
    parser.add_argument('--hidden', type=int, default=64)
    parser.add_argument('--reps', type=int, default=9)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--data-root', default=DEFAULT_DATA)
    parser.add_argument('--out', default=None, help='write a .md here')
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings('ignore', category=DeprecationWarning)
    if any(not g.startswith('random-') for g in args.graphs):
        args.data_root = copy_data(args.data_root)
    rows = []
    for graph in args.graphs:
        for heads in args.heads:
            rows.append(measure(graph, heads, args))
            print(rows[-1], flush=True)
    text = markdown(rows, argv if argv is not None else sys.argv[1:])
    print(text)
    if args.out:
        with open(args.out, 'w') as f:
            f.write(text)
    return rows


if __name__ == '__main__':
    main()
