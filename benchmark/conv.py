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
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('VmHWM:'):
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
    r"""Runs in a fresh process, under an address-space cap on CPU: one
    full-batch training step (forward, cross-entropy, backward) of a
    :class:`DeepModel` on a random graph of ogbn-arxiv's size. Prints JSON
    with the peak memory of the step, the bytes saved for backward and the
    time, or :obj:`"error": "exceeds cap"`.
    """
    device = torch.device(spec['device'])
    cap = int(spec['cap_gb'] * 2**30)
    if device.type == 'cpu' and cap > 0:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
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
        'step in its own process, on CPU under an address-space cap of '
        f'{args.mem_cap_gb:g} GiB (`RLIMIT_AS`). Peak: CPU peak resident '
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
        help='address-space cap of each --deep process on CPU (0: none)',
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


def command_line(argv: Optional[List[str]]) -> str:
    r"""The command that produced a result file, as the user typed it."""
    args = argv if argv is not None else sys.argv[1:]
    return ' '.join(['python', 'benchmark/conv.py', *args])


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


if __name__ == '__main__':
    main()
