r"""What the benchmark scripts measure with: graphs, layers and their
training steps, the chunk size in force, the timing loops, memory probes,
out-of-memory detection (the command-line options are :obj:`cli`'s, which
it re-exports; the result files are :obj:`report`'s, the plots
:obj:`plotting`'s).

The scripts import it as :obj:`common`: Python puts a script's own folder
first on the module search path (``python benchmark/pair.py``).
"""

import contextlib
import gc
import os
import shutil
import statistics
import tempfile
import time
import warnings
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import torch
from cli import (  # noqa: F401 (the scripts' command line, re-exported)
    DEFAULT_DATA,
    DTYPE_NAMES,
    EAGER_LOOPS,
    GATE_KERNELS,
    LAYERS,
    REAL_GRAPHS,
    SIZED_GRAPHS,
    add_layer_args,
    count_at_least,
    float_in,
    graph_name,
    int_at_least,
    parse_checked,
    positive_float,
    probability,
)
from torch import Tensor
from torch_geometric.nn import GATv2Conv
from torch_geometric.utils import coalesce

from torch_geometric_gate import GATEConv, attention_kernel

#: The dtypes of :data:`~cli.DTYPE_NAMES`, by name.
DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}

# Graphs ######################################################################


def random_graph(
    num_nodes: int,
    num_edges: int,
    channels: int,
    *,
    power_law: float = 0.0,
    isolated: int = 0,
    input_loops: int = 0,
    seed: int = 0,
    device='cpu',
) -> Tuple[Tensor, Tensor]:
    r"""A seeded random directed graph and standard normal node features.

    :obj:`num_edges` draws of (source, target) among the first
    :obj:`num_nodes - isolated` nodes, sources uniform, targets uniform
    (:obj:`power_law=0`) or with probability proportional to
    :math:`(i + 1)^{-\text{power\_law}}` (node 0 is the largest hub);
    self-loops and duplicates removed. Then :obj:`input_loops` self-loops
    :obj:`(i, i)` are appended (the layers mask those under
    :obj:`add_self_loops`); the last :obj:`isolated` nodes have no edge.
    """
    if not 0 <= isolated < num_nodes:
        raise ValueError(
            f'expected 0 <= isolated < num_nodes, got {isolated} isolated '
            f'of {num_nodes} nodes'
        )
    device = torch.device(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    active = num_nodes - isolated
    src = torch.randint(active, (num_edges,), generator=gen, device=device)
    if power_law > 0:
        rank = torch.arange(1, active + 1, device=device, dtype=torch.float)
        dst = torch.multinomial(
            rank.pow(-power_law), num_edges, replacement=True, generator=gen
        )
    else:
        dst = torch.randint(active, (num_edges,), generator=gen, device=device)
    edge_index = torch.stack([src, dst])
    edge_index = edge_index[:, src != dst]
    edge_index = coalesce(edge_index, num_nodes=num_nodes)
    loops = torch.arange(min(input_loops, active), device=device)
    edge_index = torch.cat([edge_index, loops.repeat(2, 1)], dim=1)
    x = torch.randn(num_nodes, channels, generator=gen, device=device)
    return x, edge_index


def load_graph(
    name: str,
    channels: int,
    device='cpu',
    data_root: Optional[str] = None,
    scale: float = 1.0,
) -> Tuple[Tensor, Tensor]:
    r"""The graph :obj:`name` (see :func:`graph_name`) on :obj:`device`:
    random ones with :obj:`channels` features (:obj:`scale` shrinks the
    sized graphs, for tests), real ones with their own features, read from
    :obj:`data_root` (the folder holding :obj:`Planetoid/` and
    :obj:`heterophilous/`; it is copied first, as it may be read-only).
    """
    name = graph_name(name)
    if name in REAL_GRAPHS:
        x, edge_index = _real_graph(name, data_root or DEFAULT_DATA)
        return x.to(device), edge_index.to(device)
    if name in SIZED_GRAPHS:
        nodes, edges, _ = SIZED_GRAPHS[name]
        nodes, edges = max(int(nodes * scale), 2), max(int(edges * scale), 1)
        return random_graph(nodes, edges, channels, device=device)
    kind, _, size = name.partition('-')
    edges = int(float(size))
    return random_graph(
        max(edges // 10, 2),
        edges,
        channels,
        power_law=1.0 if kind == 'powerlaw' else 0.0,
        device=device,
    )


def _real_graph(name: str, data_root: str) -> Tuple[Tensor, Tensor]:
    from torch_geometric.datasets import HeterophilousGraphDataset, Planetoid

    folder, title = REAL_GRAPHS[name]
    src = os.path.join(data_root, folder)
    if not os.path.isdir(src):
        raise FileNotFoundError(
            f"Dataset folder '{src}' not found; pass '--data-root' (the "
            f"folder that holds 'Planetoid/' and 'heterophilous/', e.g. the "
            f"data/ that examples/heterophilous.py and gate_paper's scripts "
            f'download into), or set GATE_DATA_ROOT'
        )
    cls = Planetoid if folder == 'Planetoid' else HeterophilousGraphDataset
    with tempfile.TemporaryDirectory(prefix='gate-bench-') as tmp:
        shutil.copytree(src, os.path.join(tmp, folder))
        data = cls(os.path.join(tmp, folder), title)[0]
    return data.x.float(), data.edge_index


def cpu_graphs_and_heads(
    args,
) -> Iterator[Tuple[Tensor, Tensor, int, Dict[str, object]]]:
    r"""For every graph of :obj:`args.graphs` (loaded once, on the CPU)
    and every heads of :obj:`args.heads`: :obj:`(x, edge_index, heads,
    row)`, :obj:`row` the columns that describe them (graph, nodes, edges,
    heads, torch's threads)."""
    for graph in args.graphs:
        x, edge_index = load_graph(graph, args.channels, 'cpu', args.data_root)
        for heads in args.heads:
            row = dict(
                graph=graph,
                num_nodes=x.size(0),
                num_edges=edge_index.size(1),
                heads=heads,
                threads=torch.get_num_threads(),
            )
            yield x, edge_index, heads, row


# Layers and steps ############################################################


#: The default edge elements of a chunk per intra-op thread of GATE's
#: chunked CPU loops (:attr:`~torch_geometric_gate.ops.KernelSettings.
#: chunk_elements`: :math:`2^{19}` per thread, up to 8 threads).
DEFAULT_CHUNK_LOG2 = 19


@contextlib.contextmanager
def cpu_chunk_log2(log2: Optional[int]) -> Iterator[int]:
    r"""Inside the block GATE's chunked CPU kernels walk the edges in chunks
    of :obj:`2**log2` edge elements per intra-op thread (:obj:`None`: their
    own size), through the switch's :obj:`chunk_elements` option; yields
    the log2 in force."""
    if log2 is None:
        yield DEFAULT_CHUNK_LOG2
        return
    threads = min(torch.get_num_threads(), 8)
    with attention_kernel(chunk_elements=2**log2 * threads):
        yield log2


@contextlib.contextmanager
def eager_loops(kind: str) -> Iterator[str]:
    r"""Inside the block GATE's eager CPU calls run :obj:`kind` (of
    :data:`EAGER_LOOPS`), through the switch's :obj:`eager_loops` option;
    yields what is in force (:obj:`'chunks'` where the compiled loops never
    run eager calls: past four intra-op threads, see
    :func:`~torch_geometric_gate.attention_kernel`)."""
    if kind not in EAGER_LOOPS:
        raise ValueError(f'Expected one of {EAGER_LOOPS} (got {kind!r})')
    with attention_kernel(eager_loops=kind == 'compiled'):
        yield kind if torch.get_num_threads() <= 4 else 'chunks'


def make_layer(
    kind: str,
    in_channels: int,
    hidden: int,
    heads: int,
    concat: bool = True,
    seed: int = 0,
) -> torch.nn.Module:
    r"""GATE or GATv2Conv at equal settings (:obj:`hidden = heads *
    out_channels`, bias, self-loops, no shared weights), each with its own
    default negative slope; GATE with non-zero attention vectors, as after
    training."""
    torch.manual_seed(seed)
    kwargs = dict(
        heads=heads,
        concat=concat,
        bias=True,
        add_self_loops=True,
        share_weights=False,
    )
    out_channels = max(hidden // heads, 1)
    if kind == 'GATE':
        layer = GATEConv(in_channels, out_channels, **kwargs)
        torch.nn.init.normal_(layer.att_neighbor)
        torch.nn.init.normal_(layer.att_self)
        return layer
    if kind == 'GATv2':
        return GATv2Conv(in_channels, out_channels, **kwargs)
    raise ValueError(f"Unknown layer '{kind}' (expected one of {LAYERS})")


class DeepModel(torch.nn.Module):
    r""":obj:`layers` attention layers of width :obj:`hidden` (concatenated
    heads) with ReLU in between, and a linear classifier."""

    def __init__(self, kind, in_channels, hidden, heads, layers, classes):
        super().__init__()
        self.convs = torch.nn.ModuleList(
            make_layer(kind, in_channels if i == 0 else hidden, hidden, heads,
                       seed=i)
            for i in range(layers)
        )  # fmt: skip
        self.classifier = torch.nn.Linear(hidden, classes)
        self.layers_done = 0  # Forward passes of layers completed.

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        for conv in self.convs:
            x = conv(x, edge_index).relu()
            self.layers_done += 1
        return self.classifier(x)


class Step:
    r"""One call of :obj:`model` on :obj:`(x, edge_index)` under the
    attention :obj:`kernel` (:obj:`None`: the layer's default): with
    :obj:`mode='train'` forward, :obj:`out.float().sum()` (or the
    cross-entropy against :obj:`labels`) and backward; :obj:`'forward'`;
    :obj:`'inference'` (under :func:`torch.no_grad`)."""

    def __init__(self, model, x, edge_index, kernel=None, mode='train',
                 labels=None):  # fmt: skip
        self.model, self.x, self.edge_index = model, x, edge_index
        self.kernel, self.mode, self.labels = kernel, mode, labels
        self.params = [p for p in model.parameters() if p.requires_grad]

    def forward(self) -> Tensor:
        if self.kernel is None:
            return self.model(self.x, self.edge_index)
        with attention_kernel(self.kernel):
            return self.model(self.x, self.edge_index)

    def __call__(self):
        if self.mode == 'inference':
            with torch.no_grad():
                return self.forward()
        if self.mode == 'forward':
            return self.forward()
        for p in self.params:
            p.grad = None
        out = self.forward()
        if self.labels is None:
            loss = out.float().sum()
        else:
            loss = torch.nn.functional.cross_entropy(out.float(), self.labels)
        del out
        loss.backward()


# Timing ######################################################################


def sync(device: torch.device):
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def time_call(fn: Callable, device: torch.device) -> float:
    r"""Milliseconds of one call: CUDA events on CUDA (on the current
    stream of :obj:`device`, not of the current device), else the clock."""
    if device.type == 'cuda':
        stream = torch.cuda.current_stream(device)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        return start.elapsed_time(end)
    t = time.perf_counter()
    fn()
    return 1e3 * (time.perf_counter() - t)


def time_step(fn: Callable, device, warmup: int = 1, reps: int = 5) -> float:
    r"""The median milliseconds of :obj:`reps` calls after :obj:`warmup`."""
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    sync(device)
    return statistics.median(time_call(fn, device) for _ in range(reps))


def time_rounds(
    fns: Dict[str, Callable], device, warmup: int = 1, reps: int = 5
) -> Dict[str, List[float]]:
    r"""The milliseconds of each function of :obj:`fns` in :obj:`reps`
    rounds that call them in turn (A B C ..., A B C ..., so that the drift
    of a shared machine cancels), after :obj:`warmup` untimed rounds."""
    device = torch.device(device)
    for _ in range(warmup):
        for f in fns.values():
            f()
    times: Dict[str, List[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            times[k].append(time_call(f, device))
    return times


def time_pair(fns: Dict[str, Callable], device, warmup=1, reps=5) -> dict:
    r"""Times the two functions of :obj:`fns` alternately
    (:func:`time_rounds`) after a first call each (timed: it compiles
    compiled models): the median milliseconds of each, and the median,
    minimum and maximum of the first's over the second's in the pairs."""
    device = torch.device(device)
    a, b = fns
    first = {k: time_call(f, device) for k, f in fns.items()}
    times = time_rounds(fns, device, warmup, reps)
    ratios = [x / y for x, y in zip(times[a], times[b])]
    return {
        f'{a}_ms': statistics.median(times[a]),
        f'{b}_ms': statistics.median(times[b]),
        f'{a}_first_s': first[a] / 1e3,
        f'{b}_first_s': first[b] / 1e3,
        'ratio': statistics.median(ratios),
        'ratio_min': min(ratios),
        'ratio_max': max(ratios),
    }


# Memory ######################################################################


def saved_bytes(fn: Callable) -> int:
    r"""Bytes of the distinct storages that autograd saves for backward
    while :obj:`fn` runs (a forward pass); a saved tensor subclass that
    wraps others (PyG's :class:`~torch_geometric.EdgeIndex` and its cached
    CSR/CSC) counts the storages of the tensors it wraps."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    storages: Dict[Tuple[int, str], int] = {}

    def count(t: Tensor):
        if is_traceable_wrapper_subclass(t):  # No storage of its own.
            for name in t.__tensor_flatten__()[0]:
                inner = getattr(t, name)
                if inner is not None:
                    count(inner)
            return
        s = t.untyped_storage()
        storages[(s.data_ptr(), str(t.device))] = s.nbytes()

    def pack(t: Tensor):
        count(t)
        # Not `t`: a saved output would hold its own graph in a cycle.
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    del out
    return sum(storages.values())


def cuda_peak_bytes(fn: Callable, device) -> int:
    r""":func:`torch.cuda.max_memory_allocated` during :obj:`fn` above
    what was allocated before it."""
    device = torch.device(device)
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - base


def cuda_syncs(fn: Callable) -> int:
    r"""Host synchronizations during :obj:`fn` on CUDA, counted with
    :func:`torch.cuda.set_sync_debug_mode` (one warning each)."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode('warn')
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            fn()
    finally:
        torch.cuda.set_sync_debug_mode('default')
    return sum('synchroniz' in str(w.message) for w in caught)


def is_oom(err: BaseException) -> bool:
    r"""Whether :obj:`err` is an allocation failure (CUDA's or the host's)."""
    if isinstance(err, (MemoryError, torch.OutOfMemoryError)):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and (
        'out of memory' in text or 'alloc' in text
    )


def status_of(err: BaseException) -> str:
    r"""A result row's :obj:`status` for a failed configuration."""
    if is_oom(err):
        return 'OOM'
    return f'error: {type(err).__name__}: {err}'.splitlines()[0][:200]


def free(device):
    gc.collect()
    if torch.device(device).type == 'cuda':
        torch.cuda.empty_cache()
