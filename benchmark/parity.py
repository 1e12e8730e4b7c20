r"""Do the Triton kernels compute what the chunked kernels compute, at
scale? The first check of a GPU session.

On a power-law graph (by default 20,000 nodes whose largest hubs have an
in-degree near 20,000, isolated nodes, input self-loops that the layer
masks), GATEConv with edge features runs one training step under the
Triton and under the chunked kernels, in float32 and bfloat16: the output and
the gradient of the input, the edge features and every parameter must
agree with those of the chunked kernels in float32 on the same values
(largest difference over the largest magnitude) within the dtype's
tolerance, or within twice the chunked kernels' own error in that dtype.
With dropout, the same seed must drop the same weights (bit for bit)
and repeat the step within the dtype's tolerance, or within twice the
run-to-run spread of a step without dropout (on an H100 a step did not
repeat bit for bit); about the given share must be dropped and the kept
weights scaled by 1 / (1 - p), within the tolerance or twice the
run-to-run spread of the weights. Recorded too: whether a step without
dropout repeats bit for bit, whether an evaluation forward's weights and
the layer's projections do, and the host synchronizations of a step
(CUDA). Written after every check; exit code 1 when a comparison fails::

    python benchmark/parity.py --out gpu-out
"""

import argparse
import copy
import functools
import os

from cli import (
    DEVICE_HELP,
    DTYPE_NAMES,
    check_devices,
    default_device,
    device_name,
    file_stem,
    float_in,
    int_at_least,
    probability,
)
from report import (
    describe,
    output_folder,
    result_notes,
    write_results,
)

TOLERANCE = {'float32': 1e-4, 'bfloat16': 1e-2}
COLUMNS = ['check', 'dtype', 'tensor', 'value', 'tolerance', 'status']


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument(
        '--device',
        type=device_name,
        help=f'cpu, cuda or cuda:N ({DEVICE_HELP})',
    )
    parser.add_argument('--nodes', type=int_at_least(10), default=20000)
    parser.add_argument(
        '--edges',
        type=int_at_least(10),
        default=300000,
        help='edges drawn (duplicates removed)',
    )
    parser.add_argument(
        '--power-law',
        type=float_in(0.0),
        default=1.2,
        help='target i drawn with weight (i + 1)^-p',
    )
    parser.add_argument('--isolated', type=int_at_least(0), default=100)
    parser.add_argument('--input-loops', type=int_at_least(0), default=500)
    parser.add_argument('--heads', type=int_at_least(1), default=4)
    parser.add_argument(
        '--channels',
        type=int_at_least(1),
        default=16,
        help='out_channels per head',
    )
    parser.add_argument('--edge-dim', type=int_at_least(1), default=8)
    parser.add_argument('--dropout', type=probability, default=0.3)
    parser.add_argument(
        '--dtypes',
        nargs='+',
        default=list(DTYPE_NAMES),
        choices=list(DTYPE_NAMES),
    )
    parser.add_argument('--out', default='.')
    parser.add_argument('--name', type=file_stem, default='parity')
    args = parser.parse_args(argv)
    if args.isolated >= args.nodes:
        parser.error(
            f'argument --isolated: expected fewer than --nodes '
            f'({args.nodes}), got {args.isolated}'
        )
    if args.input_loops > args.nodes - args.isolated:
        parser.error(
            f'argument --input-loops: expected at most --nodes - --isolated '
            f'({args.nodes - args.isolated}), got {args.input_loops}'
        )
    output_folder(parser, args.out)
    args.device = args.device or default_device()
    check_devices(parser, [args.device], '--device')
    return args


def step(conv, x, edge_index, edge_attr, kernel, grad, seed=0):
    r"""One training step under :obj:`kernel`, :obj:`grad` the output's
    gradient (on the output's device: a copy from the CPU in the step
    would be a host sync of its own, counted as the step's): the output
    and every gradient, by name."""
    import torch

    from torch_geometric_gate import attention_kernel

    conv.zero_grad(set_to_none=True)
    x = x.detach().requires_grad_()
    edge_attr = edge_attr.detach().requires_grad_()
    torch.manual_seed(seed)
    # The chunked kernels as ATen chunks on every device (on CPU tensors
    # the compiled loops would first compile C++ for seconds):
    with attention_kernel(kernel, eager_loops=False):
        out = conv(x, edge_index, edge_attr)
    out.backward(grad.to(out.dtype))
    got = {'out': out, 'grad x': x.grad, 'grad edge_attr': edge_attr.grad}
    got.update({f'grad {n}': p.grad for n, p in conv.named_parameters()})
    return {k: v.detach().clone() for k, v in got.items()}


def weights(conv, x, edge_index, edge_attr, seed=None, seen=None):
    r"""The attention weights of a forward under the Triton kernels; the
    outputs of :obj:`conv`'s linear layers go into :obj:`seen`."""
    import torch

    from torch_geometric_gate import attention_kernel

    if seed is not None:
        torch.manual_seed(seed)
    hooks = [
        module.register_forward_hook(
            lambda m, args, out, name=name: seen.update({name: out.clone()})
        )
        for name, module in conv.named_modules()
        if seen is not None and isinstance(module, torch.nn.Linear)
    ]
    try:
        with torch.no_grad(), attention_kernel('triton'):
            out = conv(x, edge_index, edge_attr, return_attention_weights=True)
    finally:
        for hook in hooks:
            hook.remove()
    return out[1][1]


def relative_error(a, b) -> float:
    import torch

    a, b = a.double(), b.double()
    if not (bool(torch.isfinite(a).all()) and bool(torch.isfinite(b).all())):
        return float('inf')
    scale = b.abs().max().clamp_min(1e-12)
    return float((a - b).abs().max() / scale)


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch
    from common import DTYPES, cuda_syncs, random_graph

    from torch_geometric_gate import GATEConv

    device = torch.device(args.device)
    stem = os.path.join(args.out, args.name)
    x, edge_index = random_graph(
        args.nodes, args.edges, 32, power_law=args.power_law,
        isolated=args.isolated, input_loops=args.input_loops, device=device,
    )  # fmt: skip
    in_degree = torch.bincount(edge_index[1], minlength=args.nodes)
    notes = [
        *result_notes('parity.py', argv),
        f'- graph: {args.nodes} nodes, {edge_index.size(1)} edges, largest '
        f'in-degrees {in_degree.topk(3).values.tolist()}, '
        f'{int((in_degree == 0).sum())} nodes without in-edges, '
        f'{args.input_loops} input self-loops', '', describe(__doc__),
    ]  # fmt: skip
    gen = torch.Generator().manual_seed(1)
    edge_attr = torch.randn(edge_index.size(1), args.edge_dim, generator=gen)
    # The output's gradient of every step, moved once:
    gen = torch.Generator().manual_seed(0)
    grad = torch.randn(args.nodes, args.heads * args.channels, generator=gen)
    grad = grad.to(device)
    rows = []

    def record(check, dtype, tensor, value, tolerance, ok):
        status = 'ok' if ok else ('fail' if tolerance is not None else 'warn')
        rows.append(dict(check=check, dtype=dtype, tensor=tensor, value=value,
                         tolerance=tolerance, status=status))  # fmt: skip
        write_results(rows, stem, COLUMNS, 'Triton against chunked', notes)
        print(rows[-1], flush=True)

    for name in args.dtypes:
        dtype = DTYPES[name]
        torch.manual_seed(0)
        conv = GATEConv(32, args.channels, heads=args.heads,
                        edge_dim=args.edge_dim)  # fmt: skip
        torch.nn.init.normal_(conv.att_neighbor)
        torch.nn.init.normal_(conv.att_self)
        conv = conv.to(device, dtype)
        xs, attrs = x.to(dtype), edge_attr.to(device, dtype)
        try:
            want = step(conv, xs, edge_index, attrs, 'chunked', grad)
            got = step(conv, xs, edge_index, attrs, 'triton', grad)
            # The truth: the chunked kernels in float32 on the same values.
            exact = copy.deepcopy(conv).float()
            truth = step(exact, xs.float(), edge_index, attrs.float(),
                         'chunked', grad)  # fmt: skip
            for k in want:
                err = relative_error(got[k], truth[k])
                tol = max(
                    TOLERANCE[name], 2 * relative_error(want[k], truth[k])
                )
                record('triton vs float32', name, k, err, tol, err <= tol)
            again = step(conv, xs, edge_index, attrs, 'triton', grad)
            same = [k for k in got if torch.equal(got[k], again[k])]
            spread = max(relative_error(again[k], got[k]) for k in got)
            record(
                'repeats bit for bit',
                name,
                f'{len(same)} of {len(got)}',
                len(same) == len(got),
                None,
                len(same) == len(got),
            )
            # Dropout: the same seed drops the same weights; the kept ones
            # are scaled.
            conv.dropout = args.dropout
            first = step(conv, xs, edge_index, attrs, 'triton', grad, seed=3)
            second = step(conv, xs, edge_index, attrs, 'triton', grad, seed=3)
            err = max(relative_error(first[k], second[k]) for k in first)
            tol = max(TOLERANCE[name], 2 * spread)
            record('dropout: same seed, same step', name, 'all', err, tol,
                   err <= tol)  # fmt: skip

            run = functools.partial(weights, conv, xs, edge_index, attrs)
            dropped, dropped2 = run(seed=3), run(seed=3)
            conv.eval()
            seen, seen2 = {}, {}
            plain, plain2 = run(seen=seen), run(seen=seen2)
            conv.train()
            same = torch.equal(dropped != 0, dropped2 != 0)
            record('dropout: same seed, same mask', name, 'alpha', same, 0,
                   same)  # fmt: skip
            conv.dropout = 0.0
            live = plain > 0
            kept = (dropped[live] != 0).float().mean().item()
            p = args.dropout  # Four standard errors of the share:
            tol = 4 * (p * (1 - p) / max(int(live.sum()), 1)) ** 0.5
            record(
                'dropout: share kept',
                name,
                'alpha',
                kept,
                tol,
                abs(kept - (1 - p)) <= tol,
            )
            spread = relative_error(plain2, plain)
            record('weights repeat bit for bit', name, 'alpha',
                   f'{spread:.3g}', None, spread == 0)  # fmt: skip
            # Where a difference starts: the projections, or the kernels.
            differ = [k for k in seen if not torch.equal(seen[k], seen2[k])]
            record('projections repeat bit for bit', name,
                   ' '.join(differ) or 'all', not differ, None,
                   not differ)  # fmt: skip
            scaled = dropped[live & (dropped != 0)]
            expect = plain[live & (dropped != 0)] / (1 - args.dropout)
            err = relative_error(scaled, expect) if scaled.numel() else 0.0
            tol = max(TOLERANCE[name], 2 * spread)
            record(
                'dropout: kept weights / (1 - p)',
                name,
                'alpha',
                err,
                tol,
                err <= tol,
            )
            if device.type == 'cuda':
                syncs = cuda_syncs(
                    functools.partial(step, conv, xs, edge_index, attrs,
                                      'triton', grad)
                )  # fmt: skip
                record('host syncs of a step', name, 'count', syncs, None,
                       True)  # fmt: skip
        except Exception as err:  # noqa: BLE001 (recorded, then exit 1)
            record('runs', name, f'{type(err).__name__}: {err}'[:200], None,
                   0, False)  # fmt: skip
    failed = [r for r in rows if r['status'] == 'fail']
    print(f'parity: {len(failed)} of {len(rows)} checks failed')
    return 1 if failed else 0


if __name__ == '__main__':
    raise SystemExit(main())
