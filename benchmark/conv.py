r"""Benchmark :class:`GATEConv` against PyG's :class:`GATv2Conv`.

Both layers run at equal settings (input and output channels, heads,
:obj:`concat`, :obj:`bias=True`, :obj:`add_self_loops=True`,
:obj:`share_weights=False`, no dropout), each with its own default
:obj:`negative_slope` (GATv2Conv: LeakyReLU 0.2, GATE: ReLU 0.0). GATE has
three weight matrices (values :math:`W`, score :math:`U` and :math:`V`) where
GATv2Conv has two, and no bias inside them (GATv2Conv's two have one).

For every graph, :obj:`heads`, :obj:`concat`, mode (:obj:`forward`,
:obj:`train` = forward + backward, :obj:`inference` = forward under
:func:`torch.no_grad`) and eager or :func:`torch.compile`, the two layers run
alternately (GATE, GATv2, GATE, GATv2, ...) after warm-up; the table gives the
median time of each and the median, minimum and maximum of the GATE/GATv2
ratios of the pairs, so that the drift of a shared machine cancels.
(:func:`torch_geometric.profile.benchmark` times each function in its own
block and reports no paired ratios, hence the loop here.)

Memory (eager training step): the bytes of the tensors saved for backward
(:func:`torch.autograd.graph.saved_tensors_hooks`, each storage counted once);
with :obj:`--rss` the peak resident size of a fresh process that runs one
training step (:func:`resource.getrusage`), and on CUDA
:func:`torch.cuda.max_memory_allocated`.

Run from the repository root, e.g.::

    python benchmark/conv.py --quick
    python benchmark/conv.py --rss --plot
"""

import argparse
import csv
import datetime
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

import torch
import torch_geometric
from torch import Tensor
from torch_geometric.nn import GATv2Conv
from torch_geometric.utils import coalesce, remove_self_loops
from tqdm import tqdm

try:
    from torch_geometric_gate import GATEConv
except ImportError:  # Run as a script without the package installed.
    sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
    from torch_geometric_gate import GATEConv
from torch_geometric_gate._cli import int_at_least, positive_float

RANDOM_GRAPHS = ['random-1e3', 'random-1e4', 'random-1e5', 'random-1e6']
REAL_GRAPHS = ['cora', 'minesweeper', 'tolokers']
MODES = ['forward', 'train', 'inference']
LAYERS = ('GATE', 'GATv2')
DEFAULT_DATA = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), '..', '..', 'shared', 'data'
)


# Graphs ######################################################################


def random_graph(
    num_edges: int,
    channels: int,
    degree: int = 10,
    seed: int = 0,
    num_nodes: Optional[int] = None,
) -> Tuple[Tensor, Tensor]:
    r"""A uniform random directed graph with about :obj:`num_edges` edges
    (no self-loops, no duplicates) on :obj:`num_nodes` nodes (default:
    :obj:`num_edges // degree`), and standard normal node features.
    """
    gen = torch.Generator().manual_seed(seed)
    if num_nodes is None:
        num_nodes = max(num_edges // degree, 2)
    edge_index = torch.randint(num_nodes, (2, num_edges), generator=gen)
    edge_index, _ = remove_self_loops(edge_index)
    edge_index = coalesce(edge_index, num_nodes=num_nodes)
    x = torch.randn(num_nodes, channels, generator=gen)
    return x, edge_index


def real_graph(name: str, data_root: str) -> Tuple[Tensor, Tensor]:
    r"""Cora, Minesweeper or Tolokers with their own node features."""
    from torch_geometric.datasets import HeterophilousGraphDataset, Planetoid

    if name == 'cora':
        return _dataset(Planetoid, 'Planetoid', 'Cora', data_root)
    title = {'minesweeper': 'Minesweeper', 'tolokers': 'Tolokers'}[name]
    return _dataset(
        HeterophilousGraphDataset, 'heterophilous', title, data_root
    )


def _dataset(cls, folder: str, title: str, data_root: str):
    src = os.path.join(data_root, folder)
    if not os.path.isdir(src):
        raise FileNotFoundError(
            f"Dataset folder '{src}' not found; pass '--data-root' (the "
            f"folder that holds 'Planetoid/' and 'heterophilous/')"
        )
    data = cls(src, title)[0]
    return data.x.float(), data.edge_index


def load_graph(name: str, channels: int, data_root: str):
    if name.startswith('random-'):
        return random_graph(int(float(name.split('-')[1])), channels)
    if name in REAL_GRAPHS:
        return real_graph(name, data_root)
    raise ValueError(
        f"Unknown graph '{name}' (expected one of "
        f'{RANDOM_GRAPHS + REAL_GRAPHS})'
    )


def copy_data(data_root: str) -> str:
    r"""Copies the dataset folders to a temporary directory (the shared
    folder is read-only) and returns it.
    """
    tmp = tempfile.mkdtemp(prefix='gate-bench-')
    for folder in ('Planetoid', 'heterophilous'):
        src = os.path.join(data_root, folder)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(tmp, folder))
    return tmp


# Layers and steps ############################################################


def make_layer(
    kind: str,
    in_channels: int,
    hidden: int,
    heads: int,
    concat: bool,
    seed: int = 0,
) -> torch.nn.Module:
    torch.manual_seed(seed)
    out_channels = max(hidden // heads, 1)
    kwargs = dict(
        heads=heads,
        concat=concat,
        bias=True,
        add_self_loops=True,
        share_weights=False,
    )
    if kind == 'GATE':
        layer = GATEConv(in_channels, out_channels, **kwargs)
        # Non-zero attention, as after training (zero is uniform attention):
        torch.nn.init.normal_(layer.att_neighbor)
        torch.nn.init.normal_(layer.att_self)
    elif kind == 'GATv2':
        layer = GATv2Conv(in_channels, out_channels, **kwargs)
    else:
        raise ValueError(f"Unknown layer '{kind}'")
    return layer


def run_step(
    model, x: Tensor, edge_index: Tensor, mode: str, params: List[Tensor]
):
    if mode == 'inference':
        with torch.no_grad():
            return model(x, edge_index)
    out = model(x, edge_index)
    if mode == 'train':
        for p in params:
            p.grad = None
        out.sum().backward()
    return out


def sync(device: torch.device):
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def timed(model, x, edge_index, mode, params, device) -> float:
    sync(device)
    t = time.perf_counter()
    run_step(model, x, edge_index, mode, params)
    sync(device)
    return time.perf_counter() - t


def saved_for_backward_bytes(model, x: Tensor, edge_index: Tensor) -> int:
    r"""Bytes of the distinct storages that autograd saves for backward in
    one forward pass.
    """
    storages: Dict[Tuple[int, str], int] = {}

    def pack(t: Tensor):
        s = t.untyped_storage()
        storages[(s.data_ptr(), str(t.device))] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x, edge_index)
    del out
    return sum(storages.values())


def cuda_peak_bytes(model, x, edge_index, params) -> int:
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    run_step(model, x, edge_index, 'train', params)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def cuda_syncs_per_forward(model, x, edge_index) -> int:
    r"""Host synchronizations in one forward pass on CUDA, counted with
    :func:`torch.cuda.set_sync_debug_mode` (one warning per sync).
    """
    import warnings

    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode('warn')
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            model(x, edge_index)
    finally:
        torch.cuda.set_sync_debug_mode('default')
    return sum('synchroniz' in str(w.message) for w in caught)


def _maxrss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == 'darwin' else rss * 1024


def _reset_peak_rss() -> bool:
    r"""Resets the peak resident size (Linux :obj:`VmHWM`) to the current
    one, so that the peak of the step is not hidden by the graph's
    construction. Returns :obj:`False` where this is not supported.
    """
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        return _vm_hwm_bytes() is not None
    except OSError:
        return False


def _vm_hwm_bytes() -> Optional[int]:
    return _proc_status_bytes('VmHWM')


def _proc_status_bytes(key: str) -> Optional[int]:
    r"""A size from Linux's :obj:`/proc/self/status` (:obj:`VmHWM`,
    :obj:`VmSize`, ...) in bytes, or :obj:`None` elsewhere."""
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith(key + ':'):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def rss_worker(spec: dict):
    r"""Runs in a fresh process: one eager training step of one layer,
    printing the peak resident size before and after it as JSON (Linux:
    the peak is reset after the graph is built).
    """
    torch.set_num_threads(spec['threads'])
    x, edge_index = load_graph(
        spec['graph'], spec['channels'], spec['data_root']
    )
    model = make_layer(
        spec['layer'],
        x.size(1),
        spec['hidden'],
        spec['heads'],
        spec['concat'],
    )
    params = list(model.parameters())
    peak = _vm_hwm_bytes if _reset_peak_rss() else _maxrss_bytes
    before = peak()
    run_step(model, x, edge_index, 'train', params)
    print(json.dumps({'before': before, 'peak': peak()}))


def peak_rss(spec: dict) -> Tuple[int, int]:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        '--rss-worker',
        json.dumps(spec),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f'RSS worker failed:\n{proc.stderr[-2000:]}')
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    return res['before'], res['peak']


# Deep model (--deep) #########################################################

# ogbn-arxiv's size: nodes, edges, input features, classes.
ARXIV = dict(num_nodes=169343, num_edges=1166243, channels=128, classes=40)


class DeepModel(torch.nn.Module):
    r""":obj:`layers` attention layers of width :obj:`hidden` (concatenated
    heads) with ReLU in between, and a linear classifier.
    """

    def __init__(self, kind, in_channels, hidden, heads, layers, classes):
        super().__init__()
        self.convs = torch.nn.ModuleList(
            [
                make_layer(
                    kind,
                    in_channels if i == 0 else hidden,
                    hidden,
                    heads,
                    True,
                    seed=i,
                )
                for i in range(layers)
            ]
        )
        self.classifier = torch.nn.Linear(hidden, classes)
        self.layers_done = 0  # forward passes of layers completed

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        for conv in self.convs:
            x = conv(x, edge_index).relu()
            self.layers_done += 1
        return self.classifier(x)


def _is_out_of_memory(err: BaseException) -> bool:
    text = str(err).lower()
    return isinstance(err, MemoryError) or (
        isinstance(err, RuntimeError)
        and ('alloc' in text or 'out of memory' in text)
    )


def deep_worker(spec: dict):
    r"""Runs in a fresh process, under a cap on the address space it adds on
    CPU (:obj:`RLIMIT_AS` set to what its imports mapped plus the cap: the
    libraries of a CUDA build of torch map about 3 GiB, a CPU build's
    about 1 GiB): one
    full-batch training step (forward, cross-entropy, backward) of a
    :class:`DeepModel` on a random graph of ogbn-arxiv's size. Prints JSON
    with the peak memory of the step, the bytes saved for backward and the
    time, or :obj:`"error": "exceeds cap"`.
    """
    device = torch.device(spec['device'])
    cap = int(spec['cap_gb'] * 2**30)
    if device.type == 'cpu' and cap > 0:
        mapped = _proc_status_bytes('VmSize') or 0
        resource.setrlimit(resource.RLIMIT_AS, (mapped + cap, mapped + cap))
    torch.set_num_threads(spec['threads'])
    res: dict = {}
    model = None
    try:
        x, edge_index = random_graph(
            int(ARXIV['num_edges'] * spec['scale']),
            ARXIV['channels'],
            num_nodes=int(ARXIV['num_nodes'] * spec['scale']),
        )
        gen = torch.Generator().manual_seed(1)
        y = torch.randint(ARXIV['classes'], (x.size(0),), generator=gen)
        model = DeepModel(
            spec['layer'],
            x.size(1),
            spec['hidden'],
            spec['heads'],
            spec['layers'],
            ARXIV['classes'],
        )
        x, edge_index, y = x.to(device), edge_index.to(device), y.to(device)
        model = model.to(device)
        res.update(num_nodes=x.size(0), num_edges=edge_index.size(1))
        if device.type == 'cuda':
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        else:
            peak = _vm_hwm_bytes if _reset_peak_rss() else _maxrss_bytes
            base = peak()
        storages: Dict[int, int] = {}

        def pack(t: Tensor):
            s = t.untyped_storage()
            storages[s.data_ptr()] = s.nbytes()
            return t

        sync(device)
        t = time.perf_counter()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(x, edge_index)
        loss = torch.nn.functional.cross_entropy(out, y)
        del out
        loss.backward()
        sync(device)
        res['step_s'] = time.perf_counter() - t
        res['saved_mb'] = sum(storages.values()) / 2**20
        if device.type == 'cuda':
            res['peak_mb'] = torch.cuda.max_memory_allocated() / 2**20
            res['step_mb'] = res['peak_mb'] - base / 2**20
        else:
            res['peak_mb'] = peak() / 2**20
            res['step_mb'] = res['peak_mb'] - base / 2**20
    except (MemoryError, RuntimeError) as err:
        if not _is_out_of_memory(err):
            raise
        res['error'] = 'exceeds cap'
        res['detail'] = str(err).splitlines()[0][:200]
        if model is not None:
            res['layers_done'] = model.layers_done
    print(json.dumps(res))


def run_deep(args, argv) -> List[dict]:
    devices = args.devices or (
        ['cpu', 'cuda'] if torch.cuda.is_available() else ['cpu']
    )
    rows = []
    for device in devices:
        for layer in args.deep_layers:
            spec = dict(
                device=device,
                layer=layer,
                layers=args.deep_depth,
                hidden=args.deep_hidden,
                heads=args.deep_heads,
                cap_gb=args.mem_cap_gb,
                threads=torch.get_num_threads(),
                scale=args.deep_scale,
            )
            cmd = [
                sys.executable,
                os.path.abspath(__file__),
                '--deep-worker',
                json.dumps(spec),
            ]
            print(f'deep: {device} {layer} ...', flush=True)
            proc = subprocess.run(
                cmd, capture_output=True, text=True, check=False
            )
            row = dict(spec)
            lines = proc.stdout.strip().splitlines()
            if proc.returncode == 0 and lines:
                row.update(json.loads(lines[-1]))
            elif proc.returncode < 0 or 'MemoryError' in proc.stderr:
                row['error'] = 'exceeds cap'
                row['detail'] = f'exit code {proc.returncode}'
            else:
                raise RuntimeError(
                    f'deep worker failed:\n{proc.stderr[-2000:]}'
                )
            rows.append(row)
    write_deep(rows, args, argv)
    return rows


def write_deep(rows: List[dict], args, argv):
    cmd = command_line(argv)
    lines = [
        '# Deep full-batch training step on a graph of ogbn-arxiv size',
        '',
        f'Command: `{cmd}`',
        '',
        machine_info(),
        '',
        f'{args.deep_depth} layers of width {args.deep_hidden} '
        f'({args.deep_heads} head(s), concatenated), ReLU in between, a '
        f'linear classifier to {ARXIV["classes"]} classes, cross-entropy; '
        f'a uniform random graph with '
        f'{int(ARXIV["num_nodes"] * args.deep_scale)} nodes, about '
        f'{int(ARXIV["num_edges"] * args.deep_scale)} edges (self-loops and '
        'duplicates removed) and '
        f'{ARXIV["channels"]} input features. Each model runs one training '
        'step in its own process, on CPU under a cap of '
        f'{args.mem_cap_gb:g} GiB on the address space it adds after its '
        'imports (`RLIMIT_AS`). Peak: CPU peak resident '
        'size (Linux `VmHWM`), CUDA `max_memory_allocated`; *step*: its '
        'growth during the step; saved: distinct storages saved for '
        'backward.',
        '',
        '| device | layer | edges | peak MB | step MB | saved MB | step s |',
        '|' + '---|' * 7,
    ]
    for r in rows:
        if 'error' in r:
            error = r['error']
            if 'layers_done' in r:
                error += (
                    f' (in the forward pass of layer {r["layers_done"] + 1})'
                    if r['layers_done'] < r['layers']
                    else ' (in backward)'
                )
            cells = [error] + ['-'] * 3
            edges = '-'
        else:
            cells = [
                f'{r["peak_mb"]:.0f}',
                f'{r["step_mb"]:.0f}',
                f'{r["saved_mb"]:.0f}',
                f'{r["step_s"]:.1f}',
            ]
            edges = str(r['num_edges'])
        lines.append(
            f'| {r["device"]} | {r["layer"]} | {edges} | '
            + ' | '.join(cells)
            + ' |'
        )
    lines.append('')
    text = '\n'.join(lines)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, args.name)
    with open(stem + '.md', 'w') as f:
        f.write(text)
    with open(stem + '.json', 'w') as f:
        json.dump(rows, f, indent=1)
    print(text)


# Measurement #################################################################


def measure_pair(models, x, edge_index, mode, device, args) -> dict:
    r"""Times both layers alternately and returns their medians and the
    ratios of the pairs.
    """
    params = {k: list(m.parameters()) for k, m in models.items()}
    first = {}
    for k in LAYERS:  # The first call compiles (compiled models).
        first[k] = timed(models[k], x, edge_index, mode, params[k], device)
    for _ in range(args.warmup):
        pair = sum(
            timed(models[k], x, edge_index, mode, params[k], device)
            for k in LAYERS
        )
    if args.warmup == 0:
        pair = sum(first.values())
    reps = args.reps
    if reps is None:
        reps = math.ceil(args.target_time / max(pair, 1e-9))
        reps = min(max(reps, args.min_reps), args.max_reps)
    times = {k: [] for k in LAYERS}
    for _ in range(reps):
        for k in LAYERS:
            times[k].append(
                timed(models[k], x, edge_index, mode, params[k], device)
            )
    ratios = [a / b for a, b in zip(times['GATE'], times['GATv2'])]
    return {
        'reps': reps,
        'gate_ms': 1e3 * statistics.median(times['GATE']),
        'gatv2_ms': 1e3 * statistics.median(times['GATv2']),
        'ratio': statistics.median(ratios),
        'ratio_min': min(ratios),
        'ratio_max': max(ratios),
        'gate_first_s': first['GATE'],
        'gatv2_first_s': first['GATv2'],
    }


def graph_name(text: str) -> str:
    r"""An :mod:`argparse` type: a real graph's name or :obj:`random-N`,
    a random graph of :obj:`N >= 100` edges (e.g. :obj:`random-1e4`)."""
    if text in REAL_GRAPHS:
        return text
    if text.startswith('random-'):
        try:
            num_edges = float(text.split('-', 1)[1])
        except ValueError:
            num_edges = math.nan
        if (
            math.isfinite(num_edges)
            and num_edges >= 100
            and num_edges % 1 == 0
        ):
            return text
    raise argparse.ArgumentTypeError(
        f'expected one of {REAL_GRAPHS} or random-N with an integer N >= '
        f'100 edges (e.g. random-1e4), got {text!r}'
    )


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Benchmark GATEConv against GATv2Conv.'
    )
    parser.add_argument(
        '--graphs',
        nargs='+',
        default=RANDOM_GRAPHS + REAL_GRAPHS,
        type=graph_name,
        help='random-1e3 ... random-1e6, cora, minesweeper, tolokers',
    )
    parser.add_argument(
        '--heads', nargs='+', type=int_at_least(1), default=[1, 8]
    )
    parser.add_argument(
        '--concat',
        nargs='+',
        default=['true', 'false'],
        choices=['true', 'false'],
    )
    parser.add_argument('--modes', nargs='+', default=MODES, choices=MODES)
    parser.add_argument(
        '--compile',
        nargs='+',
        default=['eager', 'compiled'],
        choices=['eager', 'compiled'],
        help='eager and/or torch.compile',
    )
    parser.add_argument(
        '--compile-min-edges',
        type=int_at_least(0),
        default=0,
        help='compile only on graphs with this many edges',
    )
    parser.add_argument(
        '--devices',
        nargs='+',
        default=None,
        help='default: cpu, and cuda when available',
    )
    parser.add_argument(
        '--channels',
        type=int_at_least(1),
        default=64,
        help='input channels of the random graphs',
    )
    parser.add_argument(
        '--hidden',
        type=int_at_least(1),
        default=64,
        help='heads * out_channels (a multiple of every --heads)',
    )
    parser.add_argument('--warmup', type=int_at_least(0), default=1)
    parser.add_argument(
        '--reps',
        type=int_at_least(1),
        default=None,
        help='pairs per config (default: adaptive)',
    )
    parser.add_argument(
        '--target-time',
        type=positive_float,
        default=3.0,
        help='seconds of timed pairs per config (adaptive)',
    )
    parser.add_argument('--min-reps', type=int_at_least(1), default=3)
    parser.add_argument('--max-reps', type=int_at_least(1), default=20)
    parser.add_argument(
        '--threads',
        type=int_at_least(1),
        default=None,
        help='torch.set_num_threads (default: torch default)',
    )
    parser.add_argument(
        '--no-memory',
        action='store_true',
        help='skip the saved-for-backward bytes',
    )
    parser.add_argument(
        '--rss',
        action='store_true',
        help='peak RSS of a separate process per config',
    )
    parser.add_argument('--rss-min-edges', type=int_at_least(0), default=0)
    parser.add_argument('--data-root', default=DEFAULT_DATA)
    parser.add_argument(
        '--out',
        default=os.path.join(
            os.path.dirname(os.path.abspath(__file__)), 'results'
        ),
    )
    parser.add_argument(
        '--name', default='conv', help='file name stem of the outputs'
    )
    parser.add_argument(
        '--plot', action='store_true', help='plot time against edges (log-log)'
    )
    parser.add_argument(
        '--quick', action='store_true', help='small smoke run (< 1 minute)'
    )
    parser.add_argument(
        '--deep',
        action='store_true',
        help='only the deep full-batch model on a graph of ogbn-arxiv size, '
        'one process per layer kind (see --deep-*, --mem-cap-gb)',
    )
    parser.add_argument(
        '--deep-layers', nargs='+', default=list(LAYERS), choices=LAYERS
    )
    parser.add_argument('--deep-depth', type=int, default=12)
    parser.add_argument('--deep-hidden', type=int, default=256)
    parser.add_argument('--deep-heads', type=int, default=1)
    parser.add_argument(
        '--deep-scale',
        type=float,
        default=1.0,
        help='fraction of the nodes and edges of ogbn-arxiv (tests)',
    )
    parser.add_argument(
        '--mem-cap-gb',
        type=float,
        default=12.0,
        help='cap on the address space each --deep process on CPU adds '
        'after its imports (0: none)',
    )
    parser.add_argument(
        '--kernels',
        action='store_true',
        help='the kernel suite: GATE with each attention kernel '
        '(--gate-kernels) and GATv2Conv (--compile) on --suite-graphs, '
        '--heads and --dtypes on --devices (default: cuda), training step '
        'time and peak memory, copy and forward-kernel bandwidth, the deep '
        'step on the products-size graph; writes <name>-kernels.*',
    )
    parser.add_argument(
        '--gate-kernels',
        dest='kernels_list',
        nargs='+',
        default=list(GATE_KERNELS),
        choices=GATE_KERNELS,
    )
    parser.add_argument(
        '--suite-graphs',
        nargs='+',
        default=None,
        help=f'graphs of --kernels (default: {" ".join(SUITE_GRAPHS)})',
    )
    parser.add_argument(
        '--dtypes', nargs='+', default=list(DTYPES), choices=list(DTYPES)
    )
    parser.add_argument(
        '--suite-max-seconds',
        type=positive_float,
        default=510.0,
        help='--kernels skips the configs left after this many seconds',
    )
    parser.add_argument('--rss-worker', default=None, help=argparse.SUPPRESS)
    parser.add_argument('--deep-worker', default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for heads in args.heads:
        if args.hidden % heads:
            parser.error(
                f'argument --hidden: expected a multiple of every --heads '
                f'value (heads * out_channels), got {args.hidden} for '
                f'--heads {heads}'
            )
    if args.max_reps < args.min_reps:
        parser.error(
            f'argument --max-reps: expected at least --min-reps '
            f'({args.min_reps}), got {args.max_reps}'
        )
    if args.quick:
        given = set(a.split('=')[0] for a in (argv or sys.argv[1:]))
        if '--graphs' not in given:
            args.graphs = ['random-1e3', 'random-1e4']
        if '--concat' not in given:
            args.concat = ['true']
        if '--compile' not in given:
            args.compile = ['eager']
        if '--reps' not in given:
            args.reps = 3
    return args


def main(argv: Optional[List[str]] = None) -> List[dict]:
    args = parse_args(argv)
    if args.rss_worker is not None:
        rss_worker(json.loads(args.rss_worker))
        return []
    if args.deep_worker is not None:
        deep_worker(json.loads(args.deep_worker))
        return []
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.deep:
        return run_deep(args, argv)
    if args.kernels:
        return run_kernel_suite(args, argv)
    devices = args.devices or (
        ['cpu', 'cuda'] if torch.cuda.is_available() else ['cpu']
    )
    needs_data = any(g in REAL_GRAPHS for g in args.graphs)
    data_root = copy_data(args.data_root) if needs_data else args.data_root
    for g in args.graphs:
        if g not in RANDOM_GRAPHS + REAL_GRAPHS and not g.startswith(
            'random-'
        ):
            raise ValueError(f"Unknown graph '{g}'")
    concats = [c == 'true' for c in args.concat]

    configs = [
        (d, g, h, c)
        for d in devices
        for g in args.graphs
        for h in args.heads
        for c in concats
    ]
    rows: List[dict] = []
    compiled_cache: Dict[tuple, torch.nn.Module] = {}
    graphs: Dict[str, Tuple[Tensor, Tensor]] = {}
    bar = tqdm(configs, desc='configs', dynamic_ncols=True)
    try:
        for device_name, graph, heads, concat in bar:
            bar.set_postfix_str(
                f'{device_name} {graph} H={heads} concat={concat}'
            )
            device = torch.device(device_name)
            if graph not in graphs:
                graphs = {graph: load_graph(graph, args.channels, data_root)}
            x, edge_index = (t.to(device) for t in graphs[graph])
            base = dict(
                device=device_name,
                graph=graph,
                num_nodes=x.size(0),
                num_edges=edge_index.size(1),
                in_channels=x.size(1),
                heads=heads,
                out_channels=max(args.hidden // heads, 1),
                concat=concat,
            )
            eager = {
                k: make_layer(k, x.size(1), args.hidden, heads, concat).to(
                    device
                )
                for k in LAYERS
            }
            memory = measure_memory(
                eager, x, edge_index, device, base, data_root, args
            )
            for variant in args.compile:
                if variant == 'compiled':
                    if edge_index.size(1) < args.compile_min_edges:
                        continue
                for mode in args.modes:
                    models = eager
                    if variant == 'compiled':
                        models = compiled_models(
                            compiled_cache,
                            eager,
                            x,
                            heads,
                            concat,
                            mode,
                            device_name,
                        )
                    res = measure_pair(
                        models, x, edge_index, mode, device, args
                    )
                    row = dict(base, mode=mode, variant=variant, **res)
                    e = base['num_edges']
                    row['gate_ns_per_edge'] = 1e6 * res['gate_ms'] / e
                    row['gatv2_ns_per_edge'] = 1e6 * res['gatv2_ms'] / e
                    if mode == 'train' and variant == 'eager':
                        row.update(memory)
                    rows.append(row)
    finally:
        if needs_data:
            shutil.rmtree(data_root, ignore_errors=True)
    write_outputs(rows, args, argv)
    return rows


def compiled_models(cache, eager, x, heads, concat, mode, device_name):
    # One compiled module per layer and setting, reused across graphs of the
    # same input width (dynamo recompiles once with dynamic shapes), and one
    # per grad mode (no_grad is a guard).
    grad = mode != 'inference'
    out = {}
    for k in LAYERS:
        key = (k, x.size(1), heads, concat, grad, device_name)
        if key not in cache:
            cache[key] = torch.compile(eager[k], fullgraph=(k == 'GATE'))
        out[k] = cache[key]
    return out


def measure_memory(models, x, edge_index, device, base, data_root, args):
    mem: Dict[str, float] = {}
    if not args.no_memory:
        for k in LAYERS:
            nbytes = saved_for_backward_bytes(models[k], x, edge_index)
            mem[f'{k.lower()}_saved_mb'] = nbytes / 2**20
        mem['saved_ratio'] = mem['gate_saved_mb'] / mem['gatv2_saved_mb']
    if device.type == 'cuda':
        for k in LAYERS:
            params = list(models[k].parameters())
            mem[f'{k.lower()}_cuda_peak_mb'] = (
                cuda_peak_bytes(models[k], x, edge_index, params) / 2**20
            )
            mem[f'{k.lower()}_syncs'] = cuda_syncs_per_forward(
                models[k], x, edge_index
            )
    elif args.rss and base['num_edges'] >= args.rss_min_edges:
        for k in LAYERS:
            spec = dict(
                graph=base['graph'],
                channels=args.channels,
                data_root=data_root,
                layer=k,
                hidden=args.hidden,
                heads=base['heads'],
                concat=base['concat'],
                threads=torch.get_num_threads(),
            )
            before, peak = peak_rss(spec)
            mem[f'{k.lower()}_rss_mb'] = peak / 2**20
            mem[f'{k.lower()}_rss_step_mb'] = (peak - before) / 2**20
    return mem


# Output ######################################################################

COLUMNS = [
    'device',
    'graph',
    'num_nodes',
    'num_edges',
    'in_channels',
    'heads',
    'out_channels',
    'concat',
    'mode',
    'variant',
    'reps',
    'gate_ms',
    'gatv2_ms',
    'ratio',
    'ratio_min',
    'ratio_max',
    'gate_ns_per_edge',
    'gatv2_ns_per_edge',
    'gate_first_s',
    'gatv2_first_s',
    'gate_saved_mb',
    'gatv2_saved_mb',
    'saved_ratio',
    'gate_rss_mb',
    'gatv2_rss_mb',
    'gate_rss_step_mb',
    'gatv2_rss_step_mb',
    'gate_cuda_peak_mb',
    'gatv2_cuda_peak_mb',
    'gate_syncs',
    'gatv2_syncs',
]


def command_line(
    argv: Optional[List[str]], script: str = 'benchmark/conv.py'
) -> str:
    r"""The command that produced a result file, as the user typed it."""
    args = argv if argv is not None else sys.argv[1:]
    return ' '.join(['python', script, *args])


def machine_info() -> str:
    try:
        import torch_scatter

        scatter = f'present ({torch_scatter.__version__})'
    except ImportError:
        scatter = 'absent'
    cpu = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    cpu = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    gpu = (
        torch.cuda.get_device_name(0)
        if torch.cuda.is_available()
        else 'none (GPU numbers not measured)'
    )
    return '\n'.join(
        [
            f'- date: {datetime.date.today().isoformat()}',
            f'- CPU: {cpu}, {os.cpu_count()} cores visible, torch threads '
            f'{torch.get_num_threads()}',
            f'- GPU: {gpu}',
            f'- Python {platform.python_version()}, '
            f'torch {torch.__version__}, '
            f'torch_geometric {torch_geometric.__version__}',
            f'- torch-scatter: {scatter}',
        ]
    )


def _fmt(value, digits=2):
    if value is None or value == '':
        return '-'
    if isinstance(value, float):
        return f'{value:.{digits}f}'
    return str(value)


def markdown(rows: List[dict], args, argv) -> str:
    cmd = command_line(argv)
    lines = [
        '# GATEConv vs GATv2Conv',
        '',
        f'Command: `{cmd}`',
        '',
        machine_info(),
        '',
        'Equal settings: same input channels, `heads`, `out_channels = '
        f'{args.hidden} // heads`, `concat`, `bias=True`, '
        '`add_self_loops=True`, `share_weights=False`. Each layer keeps '
        'its default `negative_slope` (GATv2Conv 0.2, GATE 0.0). GATE '
        'has 3 weight matrices (W, U, V), GATv2Conv 2. Times are medians '
        'of the repetitions; *ratio* is the median of the GATE/GATv2 '
        'ratios of the pairs run in A B A B order [min-max]; ns/edge is '
        'per input edge. *compiled* is `torch.compile` (GATE with '
        '`fullgraph=True`); *speed-up* is eager / compiled time of GATE.',
        '',
    ]

    def key(r):
        return (r['device'], r['graph'], r['heads'], r['concat'], r['mode'])

    compiled = {key(r): r for r in rows if r['variant'] == 'compiled'}
    for device in dict.fromkeys(r['device'] for r in rows):
        for mode in MODES:
            sub = [
                r
                for r in rows
                if r['device'] == device
                and r['mode'] == mode
                and r['variant'] == 'eager'
            ]
            if not sub:
                continue
            title = {
                'forward': 'forward',
                'train': 'training step (forward + backward)',
                'inference': 'inference (`torch.no_grad`)',
            }[mode]
            lines += [
                f'## {device.upper()}: {title}',
                '',
                '| graph | nodes | edges | heads | concat | GATv2 ms | '
                'GATE ms | GATE/GATv2 | GATE ns/edge | compiled GATv2 ms | '
                'compiled GATE ms | compiled GATE/GATv2 | GATE speed-up '
                '|',
                '|' + '---|' * 13,
            ]
            for r in sub:
                c = compiled.get(key(r), {})
                speedup = (r['gate_ms'] / c['gate_ms']) if c else None
                cratio = (
                    (
                        f'{c["ratio"]:.2f} [{c["ratio_min"]:.2f}-'
                        f'{c["ratio_max"]:.2f}]'
                    )
                    if c
                    else '-'
                )
                lines.append(
                    f'| {r["graph"]} | {r["num_nodes"]} | {r["num_edges"]} '
                    f'| {r["heads"]} | {r["concat"]} | '
                    f'{_fmt(r["gatv2_ms"], 1)} | {_fmt(r["gate_ms"], 1)} | '
                    f'{r["ratio"]:.2f} [{r["ratio_min"]:.2f}-'
                    f'{r["ratio_max"]:.2f}] | '
                    f'{_fmt(r["gate_ns_per_edge"], 0)} | '
                    f'{_fmt(c.get("gatv2_ms"), 1)} | '
                    f'{_fmt(c.get("gate_ms"), 1)} | {cratio} | '
                    f'{_fmt(speedup)} |'
                )
            lines.append('')
        mem = [
            r
            for r in rows
            if r['device'] == device
            and r['mode'] == 'train'
            and r['variant'] == 'eager'
            and ('gate_saved_mb' in r or 'gate_cuda_peak_mb' in r)
        ]
        if mem:
            lines += [
                f'## {device.upper()}: memory of one eager training step',
                '',
                'Saved for backward: distinct storages packed by '
                '`saved_tensors_hooks`. Peak RSS: peak resident size of a '
                'fresh process that builds the graph and runs one step '
                '(Linux `VmHWM`, reset after the graph is built; elsewhere '
                '`ru_maxrss`); *step* is its growth during the step. '
                'CUDA: `max_memory_allocated` '
                'above the memory allocated before the step; host syncs: '
                '`torch.cuda.set_sync_debug_mode` warnings in one forward.',
                '',
                '| graph | edges | heads | concat | GATv2 saved MB | '
                'GATE saved MB | GATE/GATv2 | GATv2 peak RSS MB (step) | '
                'GATE peak RSS MB (step) | GATv2 CUDA peak MB | '
                'GATE CUDA peak MB | GATv2 / GATE host syncs per forward |',
                '|' + '---|' * 12,
            ]
            for r in mem:
                rss = {
                    k: (
                        f'{r[f"{k}_rss_mb"]:.0f} ({r[f"{k}_rss_step_mb"]:.0f})'
                        if f'{k}_rss_mb' in r
                        else '-'
                    )
                    for k in ('gate', 'gatv2')
                }
                lines.append(
                    f'| {r["graph"]} | {r["num_edges"]} | {r["heads"]} | '
                    f'{r["concat"]} | {_fmt(r.get("gatv2_saved_mb"))} | '
                    f'{_fmt(r.get("gate_saved_mb"))} | '
                    f'{_fmt(r.get("saved_ratio"))} | {rss["gatv2"]} | '
                    f'{rss["gate"]} | {_fmt(r.get("gatv2_cuda_peak_mb"))} | '
                    f'{_fmt(r.get("gate_cuda_peak_mb"))} | '
                    f'{_fmt(r.get("gatv2_syncs"))} / '
                    f'{_fmt(r.get("gate_syncs"))} |'
                )
            lines.append('')
    if not any(r['device'] == 'cuda' for r in rows):
        lines += ['GPU: not measured (no CUDA device in this run).', '']
    return '\n'.join(lines)


def write_outputs(rows: List[dict], args, argv):
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, args.name)
    with open(stem + '.csv', 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction='ignore')
        writer.writeheader()
        for r in rows:
            writer.writerow(
                {
                    k: (round(v, 6) if isinstance(v, float) else v)
                    for k, v in r.items()
                }
            )
    text = markdown(rows, args, argv)
    with open(stem + '.md', 'w') as f:
        f.write(text)
    print(text)
    if args.plot:
        plot(rows, stem + '.png')


def plot(rows: List[dict], path: str):
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        1, len(MODES), figsize=(5 * len(MODES), 4), squeeze=False
    )
    for ax, mode in zip(axes[0], MODES):
        for layer, color in (('gate', 'C0'), ('gatv2', 'C1')):
            series: Dict[tuple, list] = {}
            for r in rows:
                if r['mode'] == mode and r['concat']:
                    k = (r['device'], r['heads'], r['variant'])
                    series.setdefault(k, []).append(
                        (r['num_edges'], r[f'{layer}_ms'])
                    )
            for (device, heads, variant), pts in sorted(series.items()):
                pts.sort()
                ax.plot(
                    [p[0] for p in pts],
                    [p[1] for p in pts],
                    color=color,
                    marker='o' if heads == 1 else 's',
                    linestyle='-' if variant == 'eager' else '--',
                    label=f'{"GATE" if layer == "gate" else "GATv2"} '
                    f'{device} H={heads} {variant}',
                )
        ax.set_xscale('log')
        ax.set_yscale('log')
        ax.set_xlabel('edges')
        ax.set_ylabel('ms')
        ax.set_title(mode)
        ax.grid(True, which='both', alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# The kernel suite (--kernels) ################################################

#: The graphs of the kernel suite: name -> (nodes, edges, input channels);
#: ``None`` sizes: the real graph, or random-1eK's own size.
SUITE_GRAPHS = ['cora', 'random-1e5', 'random-1e6', 'arxiv-size',
                'products-size']  # fmt: skip
SIZED_GRAPHS = {
    'arxiv-size': (169343, 1166243, 128),
    'products-size': (2449029, 123718280, 100),
}
GATE_KERNELS = ('reference', 'chunked', 'triton')
DTYPES = {'float32': torch.float32, 'bfloat16': torch.bfloat16}


def sized_graph(num_nodes, num_edges, channels, device, seed=0, scale=1.0):
    r"""A uniform random graph of the given size, drawn on :obj:`device`
    (duplicates kept, self-loops removed: the layers add their own)."""
    num_nodes = max(int(num_nodes * scale), 2)
    num_edges = max(int(num_edges * scale), 1)
    gen = torch.Generator(device=device).manual_seed(seed)
    edge_index = torch.randint(
        num_nodes, (2, num_edges), generator=gen, device=device
    )
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    x = torch.randn(num_nodes, channels, generator=gen, device=device)
    return x, edge_index


def suite_graph(name, args, device, data_root):
    r"""The graph on :obj:`device` with :obj:`--channels` node features
    (Cora's first ones, zero-padded if fewer), so that one compiled
    GATv2Conv per heads and dtype serves every graph."""
    if name in SIZED_GRAPHS:
        n, e, _ = SIZED_GRAPHS[name]
        return sized_graph(n, e, args.channels, device, scale=args.deep_scale)
    x, edge_index = load_graph(name, args.channels, data_root)
    x = x[:, : args.channels]
    if x.size(1) < args.channels:
        x = torch.nn.functional.pad(x, (0, args.channels - x.size(1)))
    return x.to(device), edge_index.to(device)


class _Step:
    r"""One training step (forward, :obj:`out.float().sum()`, backward) of a
    layer under an attention kernel."""

    def __init__(self, model, x, edge_index, kernel=None):
        from torch_geometric_gate.ops import attention_kernel

        self.model, self.x, self.edge_index = model, x, edge_index
        self.context = (
            (lambda: attention_kernel(kernel)) if kernel else (lambda: _null())
        )
        self.params = [p for p in model.parameters() if p.requires_grad]

    def __call__(self):
        for p in self.params:
            p.grad = None
        with self.context():
            out = self.model(self.x, self.edge_index)
        out.float().sum().backward()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def time_step(step, device, warmup, reps) -> Tuple[float, Optional[int]]:
    r"""The median time (ms) of :obj:`reps` calls after :obj:`warmup`, with
    CUDA events on CUDA, and the peak of
    :func:`torch.cuda.max_memory_allocated` over one call (bytes; ``None``
    on CPU)."""
    for _ in range(warmup):
        step()
    peak = None
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device)
    times = []
    for _ in range(reps):
        if device.type == 'cuda':
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t = time.perf_counter()
            step()
            times.append(1e3 * (time.perf_counter() - t))
    return statistics.median(times), peak


def copy_bandwidth(device, nbytes=2**30, reps=10) -> Optional[float]:
    r"""Device-to-device copy (GB/s, read + write), the yardstick of the
    kernels' effective bandwidth."""
    if device.type != 'cuda':
        return None
    a = torch.empty(nbytes, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    ms, _ = time_step(lambda: b.copy_(a), device, 2, reps)
    return 2 * nbytes / (ms * 1e-3) / 1e9


def forward_bandwidth(x, edge_index, heads, hidden, dtype, device, reps):
    r"""The Triton forward kernel alone on inputs like the layer's: its
    time (ms), :func:`forward_bytes` and the effective bandwidth (GB/s)."""
    from torch_geometric.utils import add_self_loops

    from torch_geometric_gate.ops import triton as tops

    n = x.size(0)
    channels = max(hidden // heads, 1)
    ei, _ = add_self_loops(edge_index, num_nodes=n)
    src, dst = ei[0], ei[1]
    gen = torch.Generator(device=device).manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, device=device).to(dtype)

    q_src, q_dst, value = (rand(n, heads, channels) for _ in range(3))
    a_s, a_t = rand(1, heads, channels), rand(1, heads, channels)
    run = tops.forward_runner(
        src, dst, q_src, q_dst, value, src == dst, a_s, a_t, 0.0, n
    )
    ms, _ = time_step(run, device, 1, reps)
    itemsize = torch.tensor([], dtype=dtype).element_size()
    out_itemsize = torch.tensor(
        [], dtype=torch.promote_types(dtype, dtype)
    ).element_size()
    nbytes = tops.forward_bytes(
        src.numel(), n, heads, channels, itemsize, out_itemsize
    )
    del run
    tops.clear_cache()
    return ms, nbytes, nbytes / (ms * 1e-3) / 1e9


def _oom(err: BaseException) -> bool:
    return isinstance(err, torch.cuda.OutOfMemoryError) or _is_out_of_memory(
        err
    )


def _free(device):
    import gc

    gc.collect()
    if device.type == 'cuda':
        torch.cuda.empty_cache()


def _variants(args, device) -> List[Tuple[str, str]]:
    out = [('GATE', k) for k in args.kernels_list]
    out += [('GATv2', v) for v in args.compile]
    return out


def run_kernel_suite(args, argv) -> List[dict]:
    r"""GATE with each attention kernel and GATv2Conv (eager, compiled) on
    the suite's graphs, heads and dtypes: training-step time and peak
    memory, the copy bandwidth and the Triton forward kernel's effective
    bandwidth, and the deep full-batch step on the products-size graph.
    Writes :obj:`<name>-kernels.csv`, :obj:`.md` and :obj:`.png`."""
    import traceback

    started = time.perf_counter()
    devices = args.devices or ['cuda']
    graphs = args.suite_graphs or SUITE_GRAPHS
    needs_data = any(g in REAL_GRAPHS for g in graphs)
    data_root = copy_data(args.data_root) if needs_data else args.data_root
    rows: List[dict] = []
    extra: Dict[str, object] = {}
    reps = args.reps or 5
    compiled: Dict[tuple, torch.nn.Module] = {}
    try:
        for device_name in devices:
            device = torch.device(device_name)
            extra[f'{device_name}_copy_gbs'] = copy_bandwidth(device)
            for graph in graphs:
                try:
                    x0, edge_index = suite_graph(
                        graph, args, device, data_root
                    )
                except Exception as err:  # noqa: BLE001
                    rows.append(
                        dict(device=device_name, graph=graph, layer='-',
                             kernel='-', status=f'no graph: {err}'[:200])
                    )  # fmt: skip
                    continue
                for heads, dtype_name in (
                    (h, d) for h in args.heads for d in args.dtypes
                ):
                    dtype = DTYPES[dtype_name]
                    x = x0.to(dtype)
                    base = dict(
                        device=device_name, graph=graph,
                        num_nodes=x.size(0), num_edges=edge_index.size(1),
                        heads=heads, dtype=dtype_name,
                        hidden=args.hidden,
                    )  # fmt: skip
                    for layer, kernel in _variants(args, device):
                        row = dict(base, layer=layer, kernel=kernel)
                        rows.append(row)
                        spent = time.perf_counter() - started
                        if spent > args.suite_max_seconds:
                            row['status'] = 'skipped (time budget)'
                            continue
                        if (
                            kernel == 'triton'
                            and device.type != 'cuda'
                            and os.environ.get('TRITON_INTERPRET') != '1'
                        ):
                            row['status'] = 'skipped (needs CUDA)'
                            continue
                        try:
                            row.update(
                                _measure_variant(
                                    layer, kernel, x, edge_index, heads,
                                    dtype, device, args, reps, compiled,
                                )
                            )  # fmt: skip
                            row['status'] = 'ok'
                        except Exception as err:  # noqa: BLE001
                            row['status'] = (
                                'OOM'
                                if _oom(err)
                                else f'error: {type(err).__name__}: {err}'
                            )[:200]
                            if not _oom(err):
                                traceback.print_exc()
                        _free(device)
                    if device.type == 'cuda' and 'triton' in args.kernels_list:
                        try:
                            ms, nbytes, gbs = forward_bandwidth(
                                x, edge_index, heads, args.hidden, dtype,
                                device, reps,
                            )  # fmt: skip
                            for r in rows[-len(_variants(args, device)) :]:
                                if r['kernel'] == 'triton':
                                    r.update(
                                        fwd_kernel_ms=ms,
                                        fwd_kernel_bytes=nbytes,
                                        fwd_kernel_gbs=gbs,
                                    )
                        except Exception as err:  # noqa: BLE001
                            print(f'forward bandwidth: {err}', file=sys.stderr)
                        _free(device)
                del x0, edge_index
                _free(device)
            _ratios(rows)
            extra[f'{device_name}_deep'] = run_deep_products(
                args, device, started
            )
    finally:
        if needs_data:
            shutil.rmtree(data_root, ignore_errors=True)
    write_kernel_suite(rows, extra, args, argv)
    return rows


def _measure_variant(layer, kernel, x, edge_index, heads, dtype, device,
                     args, reps, compiled) -> dict:  # fmt: skip
    model = (
        make_layer(layer, x.size(1), args.hidden, heads, True)
        .to(device)
        .to(dtype)
    )
    warmup = args.warmup
    if layer == 'GATE':
        step = _Step(model, x, edge_index, kernel)
    else:
        if kernel == 'compiled':
            key = (heads, dtype, device.type)
            if key not in compiled:
                compiled[key] = torch.compile(model, dynamic=True)
            else:  # Same weights' shapes: reuse the compiled code.
                compiled[key]._orig_mod.load_state_dict(model.state_dict())
            model = compiled[key]
            warmup = max(warmup, 2)
        step = _Step(model, x, edge_index)
    ms, peak = time_step(step, device, warmup, reps)
    saved = None
    if kernel != 'compiled':  # Compiled graphs save inside their own code.
        with step.context():
            saved = saved_for_backward_bytes(model, x, edge_index)
    e = edge_index.size(1)
    return dict(
        step_ms=ms,
        ns_per_edge=1e6 * ms / e,
        peak_mb=None if peak is None else peak / 2**20,
        saved_mb=None if saved is None else saved / 2**20,
        reps=reps,
    )


def _ratios(rows: List[dict]):
    r"""Each row's time and peak memory over GATv2Conv's (eager and
    compiled) of the same device, graph, heads and dtype, and its bytes
    saved for backward over eager GATv2Conv's."""
    ref = {}
    for r in rows:
        if r['layer'] == 'GATv2' and r.get('status') == 'ok':
            key = (r['device'], r['graph'], r['heads'], r['dtype'])
            ref[key + (r['kernel'],)] = r
    for r in rows:
        key = (r['device'], r['graph'], r.get('heads'), r.get('dtype'))
        for variant in ('eager', 'compiled'):
            other = ref.get(key + (variant,))
            if other is None or r.get('status') != 'ok':
                continue
            r[f'time_vs_gatv2_{variant}'] = r['step_ms'] / other['step_ms']
            if r.get('peak_mb') and other.get('peak_mb'):
                r[f'mem_vs_gatv2_{variant}'] = r['peak_mb'] / other['peak_mb']
            if variant == 'eager' and r.get('saved_mb') and other['saved_mb']:
                r['saved_vs_gatv2_eager'] = r['saved_mb'] / other['saved_mb']


def run_deep_products(args, device, started) -> List[dict]:
    r"""A full-batch training step of a 3-layer, 256-wide model (one head)
    on the products-size graph for each layer and kernel: time and peak
    memory, or the OOM."""
    n, e, c = SIZED_GRAPHS['products-size']
    out: List[dict] = []
    if 'products-size' not in (args.suite_graphs or SUITE_GRAPHS):
        return out
    x, edge_index = sized_graph(n, e, c, device, scale=args.deep_scale)
    labels = torch.randint(47, (x.size(0),), device=device)
    variants = [('GATE', k) for k in args.kernels_list] + [('GATv2', None)]
    for layer, kernel in variants:
        row = dict(
            layer=layer,
            kernel=kernel or 'eager',
            num_nodes=x.size(0),
            num_edges=edge_index.size(1),
        )
        out.append(row)
        if time.perf_counter() - started > args.suite_max_seconds:
            row['status'] = 'skipped (time budget)'
            continue
        if kernel == 'triton' and device.type != 'cuda':
            row['status'] = 'skipped (needs CUDA)'
            continue
        model = None
        try:
            model = DeepModel(layer, c, 256, 1, 3, 47).to(device)
            params = list(model.parameters())

            def step(model=model, params=params, kernel=kernel):
                for p in params:
                    p.grad = None
                with _Step(model, x, edge_index, kernel).context():
                    loss = torch.nn.functional.cross_entropy(
                        model(x, edge_index), labels
                    )
                loss.backward()

            ms, peak = time_step(step, device, 1, 1)
            peak_mb = None if peak is None else peak / 2**20
            row.update(status='ok', step_ms=ms, peak_mb=peak_mb)
        except Exception as err:  # noqa: BLE001
            row['status'] = (
                'OOM' if _oom(err) else f'error: {type(err).__name__}: {err}'
            )[:200]
        del model
        _free(device)
    return out


SUITE_COLUMNS = [
    'device', 'graph', 'num_nodes', 'num_edges', 'heads', 'hidden', 'dtype',
    'layer', 'kernel', 'status', 'reps', 'step_ms', 'ns_per_edge', 'peak_mb',
    'time_vs_gatv2_eager', 'time_vs_gatv2_compiled', 'mem_vs_gatv2_eager',
    'mem_vs_gatv2_compiled', 'saved_mb', 'saved_vs_gatv2_eager',
    'fwd_kernel_ms', 'fwd_kernel_bytes', 'fwd_kernel_gbs',
]  # fmt: skip


def write_kernel_suite(rows, extra, args, argv):
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f'{args.name}-kernels')
    with open(stem + '.csv', 'w', newline='') as f:
        writer = csv.DictWriter(f, SUITE_COLUMNS, extrasaction='ignore')
        writer.writeheader()
        for r in rows:
            writer.writerow({k: r.get(k, '') for k in SUITE_COLUMNS})
    with open(stem + '.json', 'w') as f:
        json.dump(extra, f, indent=1, default=str)
    lines = [
        '# GATE attention kernels vs GATv2Conv: training step',
        '',
        f'`{command_line(argv)}`',
        '',
        machine_info(),
        '',
    ]
    for k, v in extra.items():
        if k.endswith('_copy_gbs') and v:
            lines.append(f'- {k[: -len("_copy_gbs")]} device-to-device copy: '
                         f'{v:.0f} GB/s (read + write)')  # fmt: skip
    lines += [
        '',
        'Step: forward, `out.float().sum()`, backward; median of the reps '
        '(CUDA events on CUDA); peak: `torch.cuda.max_memory_allocated` '
        'over one step (graph and features included); saved: the bytes '
        'autograd saves for backward in one forward pass (eager only). '
        'Ratios: over GATv2Conv of the same graph, heads and dtype. fwd '
        'GB/s: the Triton forward kernel alone, `forward_bytes` / its time.',
        '',
        '| graph | edges | H | dtype | layer | kernel | ms | ns/edge | '
        'peak MB | saved MB | x GATv2 | x GATv2 compiled | mem x GATv2 | '
        'saved x GATv2 | fwd GB/s | status |',
        '|' + '---|' * 16,
    ]
    for r in rows:
        lines.append(
            '| ' + ' | '.join(_fmt(r.get(k)) for k in (
                'graph', 'num_edges', 'heads', 'dtype', 'layer', 'kernel',
                'step_ms', 'ns_per_edge', 'peak_mb', 'saved_mb',
                'time_vs_gatv2_eager', 'time_vs_gatv2_compiled',
                'mem_vs_gatv2_eager', 'saved_vs_gatv2_eager',
                'fwd_kernel_gbs', 'status',
            )) + ' |'
        )  # fmt: skip
    for k, deep in extra.items():
        if not k.endswith('_deep') or not deep:
            continue
        lines += [
            '',
            f'## {k[: -len("_deep")]}: full batch, 3 layers, 256 wide, one '
            'head, products-size graph',
            '',
            '| layer | kernel | nodes | edges | ms | peak MB | status |',
            '|---|---|---|---|---|---|---|',
        ]
        for r in deep:
            lines.append(
                '| ' + ' | '.join(_fmt(r.get(c)) for c in (
                    'layer', 'kernel', 'num_nodes', 'num_edges', 'step_ms',
                    'peak_mb', 'status',
                )) + ' |'
            )  # fmt: skip
    with open(stem + '.md', 'w') as f:
        f.write('\n'.join(lines) + '\n')
    if args.plot:
        plot_steps(suite_series(rows), stem + '.png')


def suite_series(rows: List[dict]) -> List[dict]:
    r"""The kernel suite's rows as plot points: memory is the peak on CUDA
    and the bytes saved for backward on CPU."""

    def number(value) -> Optional[float]:
        return None if value in (None, '') else float(value)

    points = []
    for r in rows:
        if r.get('status') != 'ok':
            continue
        cuda = r['device'].startswith('cuda')
        points.append(
            dict(
                panel=f'{r["device"]} H={r["heads"]} {r["dtype"]}',
                line=f'{r["layer"]} {r["kernel"]}',
                edges=int(r['num_edges']),
                ms=float(r['step_ms']),
                mb=number(r.get('peak_mb' if cuda else 'saved_mb')),
                memory='peak MB' if cuda else 'saved for backward MB',
            )
        )
    return points


def plot_steps(points: List[dict], path: str, memory_label='peak MB'):
    r"""Step time and memory against edges (log-log): one column per panel
    (device, heads, dtype), one line per layer and kernel. A panel's memory
    axis is named by its points' :obj:`memory` (else :obj:`memory_label`);
    a panel without memory numbers has no memory plot."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    panels = sorted({p['panel'] for p in points}) or ['(no data)']
    fig, axes = plt.subplots(
        2, len(panels), figsize=(4.5 * len(panels), 7), squeeze=False
    )
    for col, panel in enumerate(panels):
        lines: Dict[str, list] = {}
        for p in points:
            if p['panel'] == panel:
                lines.setdefault(p['line'], []).append(p)
        mine = [p for pts in lines.values() for p in pts]
        labels = {p['memory'] for p in mine if p.get('memory')}
        memory = ' / '.join(sorted(labels)) or memory_label
        for row, (key, label) in enumerate(
            (('ms', 'step ms'), ('mb', memory))
        ):
            ax = axes[row][col]
            if not any(p[key] is not None for p in mine):
                ax.set_axis_off()
                ax.set_title(f'{panel}: no {label}')
                continue
            for i, (name, pts) in enumerate(sorted(lines.items())):
                pts = sorted(
                    (q['edges'], q[key]) for q in pts if q[key] is not None
                )
                if pts:
                    ax.plot(*zip(*pts), marker='o', color=f'C{i}',
                            label=name)  # fmt: skip
            ax.set_xscale('log')
            ax.set_yscale('log')
            ax.set_xlabel('edges')
            ax.set_ylabel(label)
            ax.set_title(panel)
            ax.grid(True, which='both', alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == '__main__':
    main()
