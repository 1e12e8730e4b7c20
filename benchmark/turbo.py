r"""GATE's Triton attention beside turbo-gnn's fused GATv2 kernel.

turbo-gnn (ICML 2026; sources in ``../shared/peers/turbo-gnn``, BSD-3,
never copied into this repository) fuses GATv2's attention in CUDA. Its
GATv2 kernel is built here from those sources, copied to a folder outside
the checkout, with :func:`torch.utils.cpp_extension.load` and a small
binding of its two launchers (``--build``, under the caller's
``timeout``; the build's time and any error are results too). Then, on the
same prebuilt CSR (sorted once, outside the timed steps), forward and
backward of both ops, 1 head x 64 channels and 8 x 32, float32 and
bfloat16: turbo-gnn's (the message is the score's source row) and GATE's
Triton kernels through the public
:func:`~torch_geometric_gate.ops.gate_attention` on a column-sorted
:class:`EdgeIndex` (its CSR cached: no sort per call), with
:obj:`share_weights` (the score's source row is the message, one row per
edge, as turbo-gnn gathers) and without (two rows per edge). Without
self-loops every edge is scored with :math:`\mathbf{a}_s`, so GATE
computes GATv2's attention and the two ops' outputs and gradients are
compared too (:obj:`max_rel_diff`). The median
time of the repetitions (CUDA events) and the peak allocated during a step.
Without CUDA (tests) GATE runs under the Triton interpreter and turbo-gnn's
rows say why it did not run::

    python benchmark/turbo.py --build /tmp/turbo \
        --source ../shared/peers/turbo-gnn
    python benchmark/turbo.py --compare /tmp/turbo --graphs random-1e6 \
        arxiv-size products-size --out DIR
"""

import argparse
import json
import os
import shutil
import time
import traceback
from functools import partial

from cli import (
    DEFAULT_DATA,
    DEVICE_HELP,
    DTYPE_NAMES,
    check_devices,
    default_device,
    device_name,
    file_stem,
    fraction,
    graph_name,
    int_at_least,
    positive_float,
)

#: The binding of turbo-gnn's two GATv2 launchers (declared as in its
#: ``csrc/kernels.cuh``; defined in ``csrc/gatv2/gatv2_kernel.cu``).
BINDING = r"""
#include <torch/extension.h>
#include <vector>

std::vector<torch::Tensor> gatv2_forward_cuda(
    torch::Tensor l, torch::Tensor r, torch::Tensor row_ptr,
    torch::Tensor col_idx, torch::Tensor attn_vec, float negative_slope,
    torch::Tensor light_nodes, torch::Tensor heavy_nodes,
    int light_warps_per_block, int heavy_warps_per_block);

std::vector<torch::Tensor> gatv2_backward_cuda(
    torch::Tensor grad_h, torch::Tensor l, torch::Tensor r,
    torch::Tensor row_ptr, torch::Tensor col_idx, torch::Tensor row_ptr_T,
    torch::Tensor col_idx_T, torch::Tensor attn_vec, torch::Tensor logsumexp,
    float negative_slope, int grad_A_reduce_row_chunk_size,
    torch::Tensor fwd_light_nodes, torch::Tensor fwd_heavy_nodes,
    torch::Tensor bwd_light_nodes, torch::Tensor bwd_heavy_nodes,
    int light_warps_per_block, int heavy_warps_per_block, bool is_directed);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("gatv2_forward", &gatv2_forward_cuda);
  m.def("gatv2_backward", &gatv2_backward_cuda);
}
"""
MODULE = 'turbo_gnn_gatv2'
#: The files of turbo-gnn the build needs (relative to its root).
SOURCES = ('csrc/gatv2/gatv2_kernel.cu', 'csrc/common.cuh')
COLUMNS = [
    'device', 'graph', 'num_nodes', 'num_edges', 'heads', 'channels',
    'dtype', 'op', 'status', 'reps', 'ms', 'ns_per_edge', 'peak_mb',
    'time_vs_turbo', 'peak_vs_turbo', 'max_rel_diff',
]  # fmt: skip
#: turbo-gnn's defaults (``turbo_gnn.ops.gatv2_aggr``).
SLOPE, QUANTILE, CHUNK, WARPS = 0.2, 0.99, 512, (1, 8)
TITLE = 'GATE vs turbo-gnn (GATv2)'


def shape(text: str) -> str:
    r"""An argparse type: :obj:`HxC`, heads and channels per head, each an
    integer :obj:`>= 1`."""
    heads, _, channels = text.partition('x')
    if not (
        heads.isdecimal()
        and channels.isdecimal()
        and int(heads) >= 1
        and int(channels) >= 1
    ):
        raise argparse.ArgumentTypeError(
            f'expected HxC, heads and channels each an integer >= 1 '
            f'(e.g. 8x32), got {text!r}'
        )
    return text


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument(
        '--build', metavar='DIR',
        help='copy the sources to DIR (outside the checkout) and build',
    )  # fmt: skip
    parser.add_argument(
        '--source', default=os.path.join('..', 'shared', 'peers', 'turbo-gnn')
    )
    parser.add_argument(
        '--compare', metavar='DIR',
        help="time both ops with the module built in DIR (if it was)",
    )  # fmt: skip
    parser.add_argument(
        '--graphs', nargs='+', type=graph_name,
        default=['random-1e6', 'arxiv-size', 'products-size'],
    )  # fmt: skip
    parser.add_argument(
        '--shapes', nargs='+', type=shape, default=['1x64', '8x32'],
        help='heads x channels',
    )  # fmt: skip
    parser.add_argument(
        '--dtypes', nargs='+', default=['float32', 'bfloat16'],
        choices=list(DTYPE_NAMES),
    )  # fmt: skip
    parser.add_argument('--data-root', default=DEFAULT_DATA)
    parser.add_argument('--reps', type=int_at_least(1), default=5)
    parser.add_argument('--scale', type=fraction, default=1.0)
    parser.add_argument('--max-seconds', type=positive_float, default=1e9)
    parser.add_argument(
        '--device',
        type=device_name,
        help=f'cpu, cuda or cuda:N ({DEVICE_HELP})',
    )
    parser.add_argument('--out', default='benchmark/results')
    parser.add_argument('--name', type=file_stem, default='turbo')
    args = parser.parse_args(argv)
    if not args.build and not args.compare:
        parser.error('expected --build DIR and/or --compare DIR')
    from report import output_folder

    output_folder(parser, args.out)
    args.device = args.device or default_device()
    check_devices(parser, [args.device], '--device')
    return args


# The build ###################################################################


def _load(folder: str, verbose=False):
    from torch.utils.cpp_extension import load

    src = os.path.join(folder, 'src')
    build = os.path.join(folder, 'build')
    os.makedirs(build, exist_ok=True)
    return load(
        name=MODULE,
        sources=[os.path.join(src, 'binding.cpp'),
                 os.path.join(src, 'csrc', 'gatv2', 'gatv2_kernel.cu')],
        extra_include_paths=[os.path.join(src, 'csrc')],
        extra_cflags=['-O3'],
        extra_cuda_cflags=['-O3'],
        build_directory=build,
        verbose=verbose,
    )  # fmt: skip


def build(folder: str, source: str) -> dict:
    r"""Copies turbo-gnn's GATv2 sources and the binding to
    :obj:`folder/src` and builds them in :obj:`folder/build`; writes and
    returns :obj:`{status, seconds, error}` (:obj:`folder/build.json`).
    A :obj:`folder` inside the checkout is refused (:class:`ValueError`):
    the peer is built beside it, never in it."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.commonpath([root, os.path.abspath(folder)]) == root:
        raise ValueError(
            f'expected a build folder outside the checkout {root!r}, got '
            f'{folder!r}'
        )
    import torch

    started = time.perf_counter()
    result = dict(status='ok', source=os.path.abspath(source))
    try:
        src = os.path.join(folder, 'src')
        for rel in SOURCES:
            path = os.path.join(source, rel)
            if not os.path.isfile(path):
                raise FileNotFoundError(f'turbo-gnn source missing: {path}')
            os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
            shutil.copy(path, os.path.join(src, rel))
        with open(os.path.join(src, 'binding.cpp'), 'w') as f:
            f.write(BINDING)
        if not torch.cuda.is_available():
            raise RuntimeError('no CUDA device: turbo-gnn is a CUDA build')
        module = _load(folder, verbose=True)
        result['library'] = module.__file__
    except Exception as err:  # noqa: BLE001 (a result)
        traceback.print_exc()
        result.update(status='failed', error=f'{type(err).__name__}: {err}')
    result['seconds'] = round(time.perf_counter() - started, 1)
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, 'build.json.tmp')
    with open(tmp, 'w') as f:
        json.dump(result, f)
    os.replace(tmp, os.path.join(folder, 'build.json'))
    print(json.dumps(result), flush=True)
    return result


def built_module(folder: str):
    r"""The built module, or the reason why there is none."""
    path = os.path.join(folder, 'build.json')
    if not os.path.isfile(path):
        return None, 'turbo-gnn not built (no build finished in time)'
    with open(path) as f:
        result = json.load(f)
    if result['status'] != 'ok':
        return None, f'turbo-gnn build failed: {result.get("error")}'[:200]
    try:
        return _import_built(result['library']), None
    except Exception as err:  # noqa: BLE001 (a result)
        from common import status_of

        return None, f'turbo-gnn load failed: {status_of(err)}'[:200]


def _import_built(library: str):
    # The built library itself: a second load() could rebuild (its ninja
    # file follows the arch list of the calling environment).
    import importlib.util

    spec = importlib.util.spec_from_file_location(MODULE, library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The comparison ##############################################################


class Graph:
    r"""The CSR of the incoming edges (targets' rows, int32), its transpose,
    turbo-gnn's light and heavy node buckets, and GATE's column-sorted
    :class:`EdgeIndex` (its CSR and CSC cached, which the Triton kernels
    read without a sort), all built once."""

    def __init__(self, edge_index, num_nodes):
        import torch
        from torch_geometric import EdgeIndex
        from torch_geometric.index import index2ptr

        n = num_nodes
        ei = EdgeIndex(edge_index, sparse_size=(n, n)).sort_by('col')[0]
        ei.get_csr()
        (colptr, _), _ = ei.get_csc()
        src, dst = ei.as_tensor().unbind(0)
        self.num_nodes, self.num_edges = n, src.numel()
        self.edge_index = ei
        # turbo-gnn's: rows of targets (sources as columns), and transposed.
        self.row_ptr = colptr.int()
        self.col_idx = src.int()
        order = torch.argsort(src * n + dst)
        self.row_ptr_t = index2ptr(src[order], n).int()
        self.col_idx_t = dst[order].int()
        self.fwd_buckets = _buckets(self.row_ptr)
        self.bwd_buckets = _buckets(self.row_ptr_t)


def _buckets(ptr):
    r"""turbo-gnn's light and heavy nodes: in-degree below the 0.99
    quantile, and at or above it (``turbo_gnn/graph.py``)."""
    import torch

    degree = (ptr[1:] - ptr[:-1]).float()
    thresh = torch.quantile(degree, QUANTILE)
    nodes = torch.arange(degree.numel(), device=ptr.device, dtype=torch.int32)
    return nodes[degree < thresh], nodes[degree >= thresh]


def turbo_step(module, g, left, right, att, grad_out):
    out, lse = module.gatv2_forward(
        left, right, g.row_ptr, g.col_idx, att, SLOPE, *g.fwd_buckets, *WARPS
    )
    grads = module.gatv2_backward(
        grad_out, left, right, g.row_ptr, g.col_idx, g.row_ptr_t,
        g.col_idx_t, att, lse, SLOPE, CHUNK, *g.fwd_buckets,
        *g.bwd_buckets, *WARPS, True,
    )  # fmt: skip
    return out, grads


def gate_step(g, left, right, att, grad_out, value=None):
    r"""GATE's Triton forward and backward through the public
    :func:`~torch_geometric_gate.ops.gate_attention` (GATv2's scoring: one
    attention vector; no self-loops) on the prebuilt :class:`EdgeIndex`:
    :obj:`right` is the score's source row, and the message too unless
    :obj:`value` is given. Returns the output and the gradients of
    :obj:`left, right` (and of :obj:`value`) and of the attention
    vector."""
    import torch

    from torch_geometric_gate.ops import attention_kernel, gate_attention

    shared = value is None
    leaves = [t.detach().requires_grad_() for t in (left, right, att)]
    if not shared:
        leaves.append(value.detach().requires_grad_())
    d_left, d_right, d_att = leaves[:3]
    with torch.enable_grad(), attention_kernel('triton'):
        out, _ = gate_attention(
            d_right, d_left, d_right if shared else leaves[3],
            g.edge_index, d_att, negative_slope=SLOPE,
        )  # fmt: skip
        grads = torch.autograd.grad(out, leaves, grad_out)
    if shared:
        return out.detach(), grads
    return out.detach(), (grads[0], grads[1], grads[3], grads[2])


def _rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def _config(module, why, g, heads, channels, dtype, device, args, over):
    r"""The rows of the three ops on one graph, shape and dtype (their
    times, peaks, ratios over turbo-gnn's, and GATE's difference from
    turbo-gnn's outputs and gradients)."""
    import torch
    from common import cuda_peak_bytes, free, status_of, time_step

    gen = torch.Generator(device=device).manual_seed(0)

    def rand(*size):
        t = torch.randn(*size, generator=gen, device=device)
        return t.to(dtype)

    n = g.num_nodes
    left, right, value, grad_out = (rand(n, heads, channels) for _ in '1234')
    att = rand(heads, channels)
    ops = {
        'turbo-gnn': partial(turbo_step, module, g, left, right, att,
                             grad_out),
        'gate-shared': partial(gate_step, g, left, right, att, grad_out),
        'gate': partial(gate_step, g, left, right, att, grad_out, value),
    }  # fmt: skip
    rows, got = {}, {}
    for op, fn in ops.items():
        row = rows[op] = dict(op=op)
        if op == 'turbo-gnn' and module is None:
            row['status'] = why
        elif over():
            row['status'] = 'skipped (time budget)'
        else:
            try:
                got[op] = fn()
                if device.type == 'cuda':
                    row['peak_mb'] = cuda_peak_bytes(fn, device) / 2**20
                row['ms'] = time_step(fn, device, 1, args.reps)
                row['ns_per_edge'] = 1e6 * row['ms'] / g.num_edges
                row.update(status='ok', reps=args.reps)
            except Exception as err:  # noqa: BLE001 (a result)
                row['status'] = status_of(err)
            free(device)
    turbo = rows['turbo-gnn']
    for row in rows.values():
        if row.get('ms') and turbo.get('ms'):
            row['time_vs_turbo'] = row['ms'] / turbo['ms']
        if row.get('peak_mb') and turbo.get('peak_mb'):
            row['peak_vs_turbo'] = row['peak_mb'] / turbo['peak_mb']
    if 'turbo-gnn' in got and 'gate-shared' in got:
        (t_out, t_grads), (g_out, g_grads) = (
            got['turbo-gnn'],
            got['gate-shared'],
        )
        pairs = [(g_out, t_out), *zip(g_grads, t_grads)]
        rows['gate-shared']['max_rel_diff'] = max(
            _rel(a, b.reshape(a.shape))
            for a, b in pairs
            if a.numel() == b.numel()
        )
    return list(rows.values())


def compare(args, folder, argv=None):
    import torch
    from common import DTYPES, free, load_graph, status_of
    from report import result_notes, write_results

    device = torch.device(args.device or default_device())
    if device.type == 'cuda':
        module, why = built_module(folder)
    else:
        module, why = None, 'turbo-gnn needs CUDA (not run)'
    started = time.perf_counter()
    rows = []
    stem = os.path.join(args.out, args.name)
    notes = result_notes('turbo.py', argv, __doc__)
    build_json = os.path.join(folder, 'build.json')
    if os.path.isfile(build_json):
        with open(build_json) as f:
            notes.append(f'turbo-gnn build: `{f.read().strip()}`')
    else:
        notes.append(f'turbo-gnn: {why}')

    def over():
        return time.perf_counter() - started > args.max_seconds

    for name in args.graphs:
        try:
            x, edge_index = load_graph(
                name, 8, device, args.data_root, args.scale
            )
            graph = Graph(edge_index, x.size(0))
        except Exception as err:  # noqa: BLE001 (recorded)
            rows.append(dict(graph=name, status=status_of(err)))
            write_results(rows, stem, COLUMNS, TITLE, notes)
            continue
        for shape in args.shapes:
            heads, channels = map(int, shape.split('x'))
            for dtype in args.dtypes:
                base = dict(
                    device=device.type, graph=name, num_nodes=graph.num_nodes,
                    num_edges=graph.num_edges, heads=heads,
                    channels=channels, dtype=dtype,
                )  # fmt: skip
                got = _config(
                    module, why, graph, heads, channels, DTYPES[dtype],
                    device, args, over,
                )  # fmt: skip
                for row in got:
                    rows.append(dict(base, **row))
                    print(rows[-1], flush=True)
                write_results(rows, stem, COLUMNS, TITLE, notes)
                free(device)
    return rows


def main(argv=None):
    args = parse_args(argv)
    if args.build:
        build(args.build, args.source)
    if args.compare:
        return compare(args, args.compare, argv)
    return None


if __name__ == '__main__':
    main()
