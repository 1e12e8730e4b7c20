r"""The Triton kernels of issue 48 beside the ones they may replace.

On GATE's attention inputs (self-loops appended, the CSR built once,
outside the timed calls), the launch helpers of
``torch_geometric_gate.ops.triton._launch`` timed pairwise, per graph,
heads and dtype: the forward (:func:`_launch_forward`) against itself with
2 warps and the one-head 2-D kernel (:func:`_launch_forward_1h`, one head
only, a few segments per program and warps); all :obj:`E x H` weights
(:func:`_forward` with :obj:`need_weights`) against the forward and the
self-loop weights alone (:func:`_loop_weights`); the backward
(:func:`_backward`) against the backward whose second pass reads the first
pass's record (:obj:`record=True`, with Triton's 4 warps and with 8). The
median time of the repetitions (CUDA events on CUDA) and each variant's
time over its baseline's; the outputs are compared too
(:obj:`max_rel_diff`). On CPU (tests) the kernels run under the Triton
interpreter::

    python benchmark/triton_variants.py --graphs random-1e6 arxiv-size \
        --heads 1 8 --dtypes float32 bfloat16 --out DIR
"""

import argparse
import os
import time

import torch
from common import (
    DTYPES,
    add_layer_args,
    free,
    load_graph,
    parse_checked,
    positive_float,
    status_of,
    time_step,
)
from report import result_notes, write_results

COLUMNS = [
    'device', 'graph', 'num_nodes', 'num_edges', 'heads', 'channels',
    'dtype', 'what', 'variant', 'status', 'reps', 'ms', 'vs_baseline',
    'max_rel_diff',
]  # fmt: skip
#: The one-head forward's (segments per program, warps) tried.
ONE_HEAD = ((1, 1), (1, 2), (4, 2), (4, 4))


def parse_args(argv=None) -> argparse.Namespace:
    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add_layer_args(parser, ['random-1e6', 'arxiv-size'])
    parser.add_argument(
        '--dtypes', nargs='+', default=['float32'], choices=list(DTYPES)
    )
    parser.add_argument('--device', default='cuda' if cuda else 'cpu')
    parser.add_argument('--scale', type=float, default=1.0)
    parser.add_argument(
        '--max-seconds', type=positive_float, default=1e9,
        help='skip the configurations left after this long',
    )  # fmt: skip
    parser.add_argument('--name', default='triton-variants')
    return parse_checked(parser, argv)


class Case:
    r"""GATE's attention inputs on a graph: self-loops appended, the CSR
    and settings as ``triton_attention`` builds them (once), random
    projections of :obj:`heads x channels`."""

    def __init__(self, edge_index, n, heads, channels, dtype, device):
        from torch_geometric_gate.ops.triton import _launch as launch
        from torch_geometric_gate.ops.triton._csr import forward_csr
        from torch_geometric_gate.ops.types import AttentionGraph

        loops = torch.arange(n, device=device)
        is_loop = torch.cat([
            torch.zeros_like(edge_index[0], dtype=torch.bool),
            torch.ones(n, dtype=torch.bool, device=device),
        ])  # fmt: skip
        graph = AttentionGraph(
            torch.cat([edge_index[0], loops]),
            torch.cat([edge_index[1], loops]), is_loop, None, n, n, n,
        )  # fmt: skip
        self.csr = forward_csr(graph)
        self.kind = is_loop.to(torch.int8)[self.csr.perm.long()].contiguous()
        gen = torch.Generator(device=device).manual_seed(0)

        def rand(*size):
            t = torch.randn(*size, generator=gen, device=device)
            return t.to(dtype)

        self.q_src, self.q_dst, self.value = (
            rand(n, heads, channels) for _ in '123'
        )
        self.a_s, self.a_t = rand(1, heads, channels), rand(1, heads, channels)
        self.grad_out = torch.randn(n, heads, channels, generator=gen,
                                    device=device)  # fmt: skip
        self.settings = launch._Settings(
            self.q_src, self.value, self.a_s, self.a_t, self.kind, n, 0.2,
            0.0, 0, False, n, None,
        )  # fmt: skip
        self.lse = None

    def forward_args(self):
        return (self.csr, self.settings, self.q_src, self.q_dst, self.value,
                None, self.a_s, self.a_t)  # fmt: skip

    def full_args(self):
        return (self.q_src, self.q_dst, self.value, None, None, self.a_s,
                self.a_t, self.csr.perm, self.csr.src, self.csr.rowptr,
                self.settings)  # fmt: skip

    def saved(self):
        return (self.q_src, self.q_dst, self.value, None, None, self.a_s,
                self.a_t, self.csr.perm, self.csr.src, self.csr.rowptr,
                self.kind, self.lse)  # fmt: skip


def variants(case, heads):
    r"""(what, variant, function) triples: each group's first one is the
    baseline."""
    from torch_geometric_gate.ops.triton import _launch as launch

    out = [
        ('forward', '3-D', lambda: launch._launch_forward(
            *case.forward_args())),
        ('forward', '3-D warps=2', lambda: launch._launch_forward(
            *case.forward_args(), warps=2)),
    ]  # fmt: skip
    if heads == 1:
        for nodes, warps in ONE_HEAD:
            out.append((
                'forward', f'1h nodes={nodes} warps={warps}',
                lambda n=nodes, w=warps: launch._launch_forward_1h(
                    *case.forward_args(), nodes=n, warps=w
                ),
            ))  # fmt: skip

    def all_weights():
        case.settings.need_weights = True
        try:
            alpha, _, _ = launch._forward(*case.full_args())
        finally:
            case.settings.need_weights = False
        return alpha[-case.settings.num_loops :]

    def loop_weights():
        _, _, lse = launch._forward(*case.full_args())
        return launch._loop_weights(
            case.q_src, case.q_dst, None, None, case.a_s, case.a_t,
            case.csr.rowptr, case.kind, lse, case.settings,
        )  # fmt: skip

    out += [('weights', 'E x H', all_weights),
            ('weights', 'loops only', loop_weights)]  # fmt: skip
    need = (True, True, True, False, False, True, True)
    out += [
        ('backward', 'recompute', lambda: launch._backward(
            case.saved(), case.settings, None, case.grad_out, need)),
        ('backward', 'record', lambda: launch._backward(
            case.saved(), case.settings, None, case.grad_out, need,
            record=True)),
        ('backward', 'record warps=8', lambda: launch._backward(
            case.saved(), case.settings, None, case.grad_out, need,
            record=True, warps=8)),
    ]  # fmt: skip
    return out


def _rel(a, b) -> float:
    if isinstance(a, (tuple, list)):
        return max(
            (_rel(x, y) for x, y in zip(a, b) if x is not None), default=0.0
        )
    a, b = a.double(), b.double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def main(argv=None):
    from torch_geometric_gate.ops.triton import _launch as launch

    args = parse_args(argv)
    device = torch.device(args.device)
    started = time.perf_counter()
    stem = os.path.join(args.out, args.name)
    notes = result_notes('triton_variants.py', argv, __doc__)
    rows = []
    for graph in args.graphs:
        x, edge_index = load_graph(graph, 8, device, args.data_root,
                                   args.scale)  # fmt: skip
        n = x.size(0)
        del x
        for heads in args.heads:
            channels = max(args.hidden // heads, 1)
            for dtype in args.dtypes:
                base = dict(
                    device=device.type, graph=graph, num_nodes=n,
                    num_edges=edge_index.size(1) + n, heads=heads,
                    channels=channels, dtype=dtype,
                )  # fmt: skip
                try:
                    case = Case(edge_index, n, heads, channels,
                                DTYPES[dtype], device)  # fmt: skip
                    _, _, case.lse = launch._forward(*case.full_args())
                except Exception as err:  # noqa: BLE001 (recorded)
                    rows.append(dict(base, status=status_of(err)))
                    write_results(rows, stem, COLUMNS, 'Triton variants',
                                  notes)  # fmt: skip
                    continue
                baseline = {}
                for what, variant, fn in variants(case, heads):
                    row = dict(base, what=what, variant=variant)
                    rows.append(row)
                    if time.perf_counter() - started > args.max_seconds:
                        row['status'] = 'skipped (time budget)'
                    else:
                        try:
                            got = fn()
                            ms = time_step(fn, device, args.warmup, args.reps)
                            row.update(status='ok', reps=args.reps, ms=ms)
                            if what not in baseline:
                                baseline[what] = (ms, got)
                            else:
                                row['vs_baseline'] = ms / baseline[what][0]
                                row['max_rel_diff'] = _rel(
                                    got, baseline[what][1]
                                )
                        except Exception as err:  # noqa: BLE001 (recorded)
                            row['status'] = status_of(err)
                    write_results(rows, stem, COLUMNS, 'Triton variants',
                                  notes)  # fmt: skip
                    print(row, flush=True)
                del case, baseline
                free(device)
    return rows


if __name__ == '__main__':
    main()
