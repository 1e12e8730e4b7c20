r"""Times this checkout's :class:`GATEConv` against the one of an earlier git
revision and PyG's :class:`GATv2Conv`, in one process, in A B C A B C order
(eager training step; the median of the per-round ratios), and compares the
bytes each saves for backward.

Run from the repository root, e.g.::

    python benchmark/compare_revisions.py 56f073e --graphs cora --heads 1 8
"""

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE = 'torch_geometric_gate/nn/conv/gate_conv.py'


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # PyG's inspector looks the module up.
    spec.loader.exec_module(module)
    return module


def _show(revision: str, path: str) -> str:
    return subprocess.run(
        ['git', 'show', f'{revision}:{path}'],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def previous_layer_class(revision: str):
    folder = tempfile.mkdtemp(prefix='gate-rev-')
    # The layer's private helpers of that revision (e.g. `_fused.py`), under
    # the module names its imports use:
    conv_dir = os.path.dirname(MODULE)
    names = subprocess.run(
        ['git', 'ls-tree', '--name-only', f'{revision}:{conv_dir}'],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in names:
        if (
            name.startswith('_')
            and name.endswith('.py')
            and name != ('__init__.py')
        ):
            path = os.path.join(folder, name)
            with open(path, 'w') as f:
                f.write(_show(revision, f'{conv_dir}/{name}'))
            dotted = conv_dir.replace('/', '.') + '.' + name[:-3]
            _load(path, dotted)
    path = os.path.join(folder, 'gate_conv.py')
    with open(path, 'w') as f:
        f.write(_show(revision, MODULE))
    return _load(path, 'gate_conv_previous').GATEConv


def saved_bytes(layer, x, edge_index) -> int:
    r"""Bytes of the distinct storages one forward saves for backward."""
    storages = {}

    def pack(t):
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x, edge_index)
    return sum(storages.values())


def step(layer, x, edge_index) -> float:
    t = time.perf_counter()
    layer(x, edge_index).sum().backward()
    return time.perf_counter() - t


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('revision')
    parser.add_argument('--graphs', nargs='+', default=['cora'])
    parser.add_argument('--heads', nargs='+', type=int, default=[1, 8])
    parser.add_argument('--reps', type=int, default=20)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--data-root', default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    sys.path.insert(0, ROOT)
    bench = _load(os.path.join(ROOT, 'benchmark', 'conv.py'), 'gate_bench')
    previous = previous_layer_class(args.revision)
    data_root = bench.copy_data(args.data_root or bench.DEFAULT_DATA)
    print(
        '| graph | heads | new/GATv2 | previous/GATv2 | new/previous '
        '| saved bytes new/previous | saved bytes new/GATv2 |'
    )
    print('|---|---|---|---|---|---|---|')
    for graph in args.graphs:
        x, edge_index = bench.load_graph(graph, 64, data_root)
        for heads in args.heads:
            new = bench.make_layer('GATE', x.size(1), 64, heads, True)
            old = previous(x.size(1), max(64 // heads, 1), heads=heads)
            old.load_state_dict(new.state_dict())
            gatv2 = bench.make_layer('GATv2', x.size(1), 64, heads, True)
            layers = {'new': new, 'previous': old, 'gatv2': gatv2}

            for layer in layers.values():
                step(layer, x, edge_index)
            times = {k: [] for k in layers}
            for _ in range(args.reps):
                for k, layer in layers.items():
                    times[k].append(step(layer, x, edge_index))

            def ratio(a, b, times=times):
                pairs = zip(times[a], times[b])
                return statistics.median(p / q for p, q in pairs)

            saved = {
                k: saved_bytes(layer, x, edge_index)
                for k, layer in layers.items()
            }
            print(
                f'| {graph} | {heads} | {ratio("new", "gatv2"):.2f} | '
                f'{ratio("previous", "gatv2"):.2f} | '
                f'{ratio("new", "previous"):.2f} | '
                f'{saved["new"] / saved["previous"]:.3f} | '
                f'{saved["new"] / saved["gatv2"]:.3f} |',
                flush=True,
            )


if __name__ == '__main__':
    main()
