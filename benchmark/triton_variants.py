r"""The Triton kernels' variants of issue 48 beside the kernels they may
replace, through the public path: :func:`torch_geometric_gate.ops.
gate_attention` under :obj:`attention_kernel('triton', **options)`.

On GATE's attention inputs (self-loops appended, a column-sorted
:class:`EdgeIndex` whose CSR is built once, outside the timed calls),
timed pairwise, per graph, heads and dtype: the forward (no gradient)
against itself with 2 warps (:obj:`triton_warps=2`) and, with one head,
the one-head layout (:obj:`triton_one_head_layout=True`, a few segments
per program and warps); the forward with all :obj:`E x H` attention
weights (:obj:`need_weights=True`) against the forward without, and
:class:`GATEConv`'s forward (on the graph without its loops, which the
layer appends) with all the weights (:obj:`return_attention_weights`) and
with the self-loops' alone (:meth:`forward_with_self_attention`, which
writes :obj:`N x H` instead of :obj:`E x H`) against the layer's without;
the
backward (the gradients of a forward run under the same options) against
the backward whose second pass reads the first pass's record
(:obj:`triton_backward_record=True`, with Triton's 4 warps and with 8)
and, with one head, the backward of the one-head layout (both passes; the
last configuration with the record too).
The median time of the repetitions (CUDA events on CUDA) and each
variant's time over its baseline's; the outputs are compared too
(:obj:`max_rel_diff`). On CPU (tests) the kernels run under the Triton
interpreter::

    python benchmark/triton_variants.py --graphs random-1e6 arxiv-size \
        --heads 1 8 --dtypes float32 bfloat16 --out DIR
"""

import argparse
import os
import time

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

COLUMNS = [
    'device', 'graph', 'num_nodes', 'num_edges', 'heads', 'channels',
    'dtype', 'what', 'variant', 'status', 'reps', 'ms', 'vs_baseline',
    'max_rel_diff',
]  # fmt: skip
#: The one-head layout's (segments per program, warps) tried.
ONE_HEAD = ((1, 1), (1, 2), (4, 2), (4, 4))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(
            "The Triton kernels' variants of issue 48 beside the kernels "
            'they may replace, through gate_attention under '
            "attention_kernel('triton', **options)."
        )
    )
    # (The kernels read projections of --hidden; no input features.)
    add_layer_args(parser, ['random-1e6', 'arxiv-size'], channels=None)
    parser.add_argument(
        '--dtypes', nargs='+', default=['float32'],
        choices=list(DTYPE_NAMES),
    )  # fmt: skip
    parser.add_argument(
        '--device',
        type=device_name,
        help=f'cpu, cuda or cuda:N ({DEVICE_HELP})',
    )
    parser.add_argument('--scale', type=fraction, default=1.0)
    parser.add_argument(
        '--max-seconds', type=positive_float, default=1e9,
        help='skip the configurations left after this long',
    )  # fmt: skip
    parser.add_argument('--name', type=file_stem, default='triton-variants')
    args = parse_checked(parser, argv)
    args.device = args.device or default_device()
    check_devices(parser, [args.device], '--device')
    return args


class Case:
    r"""GATE's attention inputs on a graph: self-loops appended, a
    column-sorted :class:`EdgeIndex` (its CSR cached by PyG, so that no
    call sorts), random projections of :obj:`heads x channels`."""

    def __init__(self, edge_index, n, heads, channels, dtype, device):
        import torch
        from torch_geometric import EdgeIndex

        self.graph = (edge_index, n)
        loops = torch.arange(n, device=device).repeat(2, 1)
        ei = EdgeIndex(torch.cat([edge_index, loops], 1), sparse_size=(n, n))
        self.edge_index = ei.sort_by('col')[0]
        self.edge_index.get_csc()
        gen = torch.Generator(device=device).manual_seed(0)

        def rand(*size):
            t = torch.randn(*size, generator=gen, device=device)
            return t.to(dtype)

        self.q_src, self.q_dst, self.value = (
            rand(n, heads, channels) for _ in '123'
        )
        self.a_s, self.a_t = rand(heads, channels), rand(heads, channels)
        self.grad_out = rand(n, heads, channels)

    def layer(self):
        r"""A :class:`GATEConv` of these heads, channels and dtype, its
        input and a column-sorted :class:`EdgeIndex` without self-loops."""
        import torch
        from torch_geometric import EdgeIndex

        from torch_geometric_gate import GATEConv

        edge_index, n = self.graph
        heads, channels = self.a_s.shape
        torch.manual_seed(0)
        conv = GATEConv(heads * channels, channels, heads=heads)
        conv = conv.to(self.value.device, self.value.dtype)
        x = torch.randn_like(self.value).view(n, heads * channels)
        ei = EdgeIndex(edge_index, sparse_size=(n, n)).sort_by('col')[0]
        return conv, x, ei

    def leaves(self):
        return (self.q_src, self.q_dst, self.value, self.a_s, self.a_t)

    def attention(self, leaves=None, need_weights=False):
        from torch_geometric_gate.ops import gate_attention

        q_src, q_dst, value, a_s, a_t = leaves or self.leaves()
        return gate_attention(
            q_src, q_dst, value, self.edge_index, a_s, a_t,
            negative_slope=0.2, need_weights=need_weights,
        )  # fmt: skip


def forward(case, options, need_weights=False):
    r"""The forward under :obj:`options`: a function returning the output
    (and the weights with :obj:`need_weights`)."""
    import torch

    from torch_geometric_gate.ops import attention_kernel

    def run():
        with torch.no_grad(), attention_kernel('triton', **options):
            out, alpha = case.attention(need_weights=need_weights)
        return out if alpha is None else (out, alpha)

    return run


def layer_forward(layer, weights):
    r"""The forward (no gradient) of :obj:`layer` (:meth:`Case.layer`)
    with the weights :obj:`'none'`, :obj:`'E x H'` (all) or :obj:`'loops'`
    (the self-loops' alone)."""
    import torch

    from torch_geometric_gate.ops import attention_kernel

    conv, x, ei = layer

    def run():
        with torch.no_grad(), attention_kernel('triton'):
            if weights == 'loops':
                return conv.forward_with_self_attention(x, ei)
            if weights == 'E x H':
                out, (_, alpha) = conv(x, ei, return_attention_weights=True)
                return out, alpha
            return conv(x, ei)

    return run


def backward(case, options):
    r"""The backward of one forward run under :obj:`options` (which it
    keeps): a function returning the gradients of the projections and
    the attention vectors."""
    import torch

    from torch_geometric_gate.ops import attention_kernel

    leaves = [t.detach().requires_grad_() for t in case.leaves()]
    with attention_kernel('triton', **options):
        out, _ = case.attention(leaves)

    def run():
        return torch.autograd.grad(
            out, leaves, case.grad_out, retain_graph=True
        )

    return run


def variants(case, heads):
    r"""(what, variant, function) triples: each group's first one is the
    baseline."""
    out = [
        ('forward', '3-D', forward(case, {})),
        ('forward', '3-D warps=2', forward(case, dict(triton_warps=2))),
    ]
    if heads == 1:
        out += _one_head('forward', forward, case)
    out += [
        ('weights', 'none', forward(case, {})),
        ('weights', 'E x H', forward(case, {}, need_weights=True)),
    ]
    layer = case.layer()  # (one for the group)
    out += [
        ('layer weights', 'none', layer_forward(layer, 'none')),
        ('layer weights', 'E x H', layer_forward(layer, 'E x H')),
        ('layer weights', 'loops N x H', layer_forward(layer, 'loops')),
    ]
    record = dict(triton_backward_record=True)
    out += [
        ('backward', 'recompute', backward(case, {})),
        ('backward', 'record', backward(case, record)),
        ('backward', 'record warps=8',
         backward(case, dict(record, triton_warps=8))),
    ]  # fmt: skip
    if heads == 1:
        out += _one_head('backward', backward, case)
        out += _one_head('backward', backward, case, ONE_HEAD[-1:], record)
    return out


def _one_head(what, run, case, configs=ONE_HEAD, more=None):
    r"""(what, variant, function) triples of the one-head layout for each
    :obj:`(nodes, warps)` of :obj:`configs`, with the options :obj:`more`
    (the record) too."""
    out = []
    for nodes, warps in configs:
        options = dict(
            triton_one_head_layout=True, triton_one_head_nodes=nodes,
            triton_warps=warps, **(more or {}),
        )  # fmt: skip
        name = '1h record' if more else '1h'
        variant = f'{name} nodes={nodes} warps={warps}'
        out.append((what, variant, run(case, options)))
    return out


def _out(got, what):
    # What a group's variants compare: the layer's output (not the weights
    # that only some return), else all they return.
    if what == 'layer weights' and isinstance(got, tuple):
        return got[0]
    return got


def _rel(a, b) -> float:
    if isinstance(a, (tuple, list)):
        return max(
            (_rel(x, y) for x, y in zip(a, b) if x is not None), default=0.0
        )
    a, b = a.double(), b.double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def main(argv=None):
    args = parse_args(argv)
    import torch
    from common import DTYPES, free, load_graph, status_of, time_step
    from report import result_notes, write_results

    device = torch.device(args.device or default_device())
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
                    runs = variants(case, heads)
                except Exception as err:  # noqa: BLE001 (recorded)
                    rows.append(dict(base, status=status_of(err)))
                    write_results(rows, stem, COLUMNS, 'Triton variants',
                                  notes)  # fmt: skip
                    continue
                baseline = {}
                for what, variant, fn in runs:
                    row = dict(base, what=what, variant=variant)
                    rows.append(row)
                    # A group's first variant is its baseline, measured or
                    # not (a failed one leaves its group without ratios):
                    first = what not in baseline
                    baseline.setdefault(what, None)
                    if time.perf_counter() - started > args.max_seconds:
                        row['status'] = 'skipped (time budget)'
                    else:
                        try:
                            got = fn()
                            ms = time_step(fn, device, args.warmup, args.reps)
                            row.update(status='ok', reps=args.reps, ms=ms)
                            if first:
                                baseline[what] = (ms, got)
                            elif baseline[what] is not None:
                                row['vs_baseline'] = ms / baseline[what][0]
                                if what != 'weights':  # (outputs)
                                    row['max_rel_diff'] = _rel(
                                        _out(got, what),
                                        _out(baseline[what][1], what),
                                    )
                        except Exception as err:  # noqa: BLE001 (recorded)
                            row['status'] = status_of(err)
                    write_results(rows, stem, COLUMNS, 'Triton variants',
                                  notes)  # fmt: skip
                    print(row, flush=True)
                del case, runs, baseline
                free(device)
    return rows


if __name__ == '__main__':
    main()
