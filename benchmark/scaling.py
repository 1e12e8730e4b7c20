r"""Memory and throughput of GATE and PyG's GATv2 network, full batch,
mini-batch on one process and data-parallel on several processes, for the
docs page "Scaling".

On a seeded random graph (:func:`common.random_graph`, by default the size
of ogbn-arxiv on a GPU and smaller on CPU) it measures, for each model at
equal settings:

- **full batch**: one training step on the whole graph (a
  :class:`common.DeepModel`): time (median of ``--reps`` after one warm-up
  step, as training nodes per second) and memory: on CUDA the peak
  allocated during the step, on CPU the bytes saved for backward;
- **mini-batch**: ``examples/distributed.py`` (run as a script: its own
  synthetic graph of the same size) with ``NeighborLoader``
  (``--num-neighbors`` per layer, global batch ``--batch-size``) in one
  process and, with ``torchrun``, in ``--procs`` processes (CPU: gloo, one
  thread each; GPU: nccl, one process per GPU, only if there are that many):
  training nodes per second after a warm-up epoch, and the peak memory of
  rank 0 (CUDA: allocated; CPU: resident set size of the process).

Writes ``scaling.csv``, ``scaling.md`` (with the command and machine) and
the runs' JSON files under the folder given as the argument::

    python benchmark/scaling.py benchmark/results/scaling-cpu
    python benchmark/scaling.py benchmark/results/scaling-gpu   # on a GPU
"""

import argparse
import csv
import json
import os
import os.path as osp
import shlex
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from common import (
    DeepModel,
    command_line,
    machine_info,
    output_folder,
    random_graph,
    saved_bytes,
)
from torch_geometric.data import Data

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
EXAMPLES = osp.join(ROOT, 'examples')
MODELS = ('GATE', 'GATv2')


def full_batch(model_name, data, args, device):
    model = DeepModel(
        model_name,
        data.num_features,
        args.hidden_channels,
        1,
        args.num_layers,
        args.num_classes,
    ).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.001)
    x, ei, y = data.x.to(device), data.edge_index.to(device), data.y
    train = data.train_mask.nonzero().view(-1).to(device)
    y = y.to(device)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x, ei)[train], y[train])
        loss.backward()
        opt.step()

    row = dict(model=model_name, setting='full batch', processes=1)
    try:
        if device.type == 'cuda':
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            step()
            torch.cuda.synchronize()
            row['measured_MB'] = (
                torch.cuda.max_memory_allocated() - base
            ) / 2**20
            row['measured'] = 'CUDA peak allocated'
        else:
            row['measured_MB'] = saved_bytes(lambda: model(x, ei)) / 2**20
            step()  # warm-up
            row['measured'] = 'saved for backward'
        times = []
        for _ in range(args.reps):
            if device.type == 'cuda':
                torch.cuda.synchronize()
            start = time.perf_counter()
            step()
            if device.type == 'cuda':
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        row['nodes_per_s'] = train.numel() / statistics.median(times)
    except torch.OutOfMemoryError:
        row['measured'] = 'out of memory'
    return row


def mini_batch(model_name, procs, args, out_dir, device):
    run_dir = osp.join(out_dir, f'{model_name}-{procs}proc')
    graph = [
        '--num-nodes', str(args.num_nodes),
        '--avg-degree', str(args.avg_degree),
        '--num-features', str(args.num_features),
        '--num-classes', str(args.num_classes),
        '--model', model_name,
        '--num-layers', str(args.num_layers),
        '--hidden-channels', str(args.hidden_channels),
        '--batch-size', str(args.batch_size),
        '--num-neighbors', *map(str, args.num_neighbors),
        '--epochs', str(args.epochs),
        '--out-dir', run_dir,
    ]  # fmt: skip
    if procs == 1:
        cmd = [sys.executable, osp.join(EXAMPLES, 'distributed.py'), *graph]
    else:
        cmd = [
            sys.executable, '-m', 'torch.distributed.run', '--standalone',
            '--nproc-per-node', str(procs),
            osp.join(EXAMPLES, 'distributed.py'), *graph,
        ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=ROOT)
    if device.type == 'cpu':
        env['OMP_NUM_THREADS'] = str(args.threads)
    env.pop('RANK', None)
    env.pop('WORLD_SIZE', None)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stdout[-2000:] + proc.stderr[-4000:])
    with open(osp.join(run_dir, 'result.json')) as f:
        res = json.load(f)
    with open(osp.join(run_dir, 'rank0.json')) as f:
        mem = json.load(f)['peak_memory_bytes']
    return dict(
        model=model_name,
        setting='mini-batch' if procs == 1 else 'data parallel (DDP)',
        processes=procs,
        nodes_per_s=res['nodes_per_s'],
        measured_MB=mem / 2**20,
        measured='rank 0 training peak '
        + ('CUDA allocated' if device.type == 'cuda' else 'RSS'),
        command=' '.join(
            shlex.quote(osp.relpath(c, ROOT) if c.startswith(ROOT) else c)
            for c in cmd
        ).replace(sys.executable, 'python'),
    )


def main(argv=None):
    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument('out_dir')
    parser.add_argument(
        '--num-nodes', type=int, default=169343 if cuda else 20000
    )
    parser.add_argument('--avg-degree', type=float, default=13.7)
    parser.add_argument('--num-features', type=int, default=128)
    parser.add_argument('--num-classes', type=int, default=40)
    parser.add_argument('--num-layers', type=int, default=3)
    parser.add_argument(
        '--hidden-channels', type=int, default=256 if cuda else 64
    )
    parser.add_argument('--batch-size', type=int, default=1024)
    parser.add_argument('--num-neighbors', type=int, nargs='+', default=[10])
    parser.add_argument('--epochs', type=int, default=3 if cuda else 2)
    parser.add_argument('--reps', type=int, default=5 if cuda else 2)
    parser.add_argument(
        '--procs',
        type=int,
        default=torch.cuda.device_count() if cuda else 2,
        help='processes of the data-parallel run (besides 1)',
    )
    parser.add_argument(
        '--threads', type=int, default=1, help='CPU threads per process'
    )
    parser.add_argument('--note', default='', help='a line for the .md')
    args = parser.parse_args(argv)
    output_folder(parser, args.out_dir, 'out_dir')
    if len(args.num_neighbors) == 1:
        args.num_neighbors = args.num_neighbors * args.num_layers
    device = torch.device('cuda' if cuda else 'cpu')
    if not cuda:
        torch.set_num_threads(args.threads)

    x, edge_index = random_graph(
        args.num_nodes,
        int(args.num_nodes * args.avg_degree),
        args.num_features,
    )
    gen = torch.Generator().manual_seed(1)
    data = Data(
        x=x,
        edge_index=edge_index,
        y=torch.randint(args.num_classes, (args.num_nodes,), generator=gen),
        train_mask=torch.rand(args.num_nodes, generator=gen) < 0.5,
    )
    rows = []
    for model_name in MODELS:
        rows.append(full_batch(model_name, data, args, device))
        print(rows[-1], flush=True)
    for procs in sorted({1, args.procs}):
        for model_name in MODELS:
            rows.append(
                mini_batch(model_name, procs, args, args.out_dir, device)
            )
            print(rows[-1], flush=True)

    keys = ['model', 'setting', 'processes', 'nodes_per_s', 'measured_MB',
            'measured', 'command']  # fmt: skip
    with open(osp.join(args.out_dir, 'scaling.csv'), 'w', newline='') as f:
        writer = csv.DictWriter(f, keys)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, '') for k in keys})

    lines = [
        '# Scaling: GATE and GATv2, full batch, mini-batch, data parallel',
        '',
        f'Command: `{command_line("scaling.py", argv)}`',
        '',
        *machine_info(),
        f'- {args.threads} thread(s) per process on CPU',
        f'- graph: {data.num_nodes} nodes, {data.num_edges} edges '
        f'(directed, avg. degree {args.avg_degree}), '
        f'{args.num_features} features, {args.num_classes} classes, '
        f'{int(data.train_mask.sum())} training nodes',
        f'- model: {args.num_layers} layers x {args.hidden_channels}, '
        f'1 head; mini-batch: global batch {args.batch_size}, '
        f'{args.num_neighbors} neighbours, {args.epochs} epochs '
        f'(first one not timed)',
    ]
    if args.note:
        lines.append(f'- note: {args.note}')
    lines += [
        '',
        '| model | setting | processes | training nodes/s | memory MB '
        '| measured as |',
        '|---|---|---|---|---|---|',
    ]
    for row in rows:
        nps = row.get('nodes_per_s')
        lines.append(
            f'| {row["model"]} | {row["setting"]} | {row["processes"]} | '
            + (f'{nps:.0f}' if nps else '-')
            + f' | {row.get("measured_MB", 0):.0f} | {row["measured"]} |'
        )
    lines += ['', 'Mini-batch commands:', '']
    lines += [f'- `{row["command"]}`' for row in rows if 'command' in row]
    with open(osp.join(args.out_dir, 'scaling.md'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
