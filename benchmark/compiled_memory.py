r"""Bytes saved for backward by GATE's chunked attention and by
:class:`~torch_geometric.nn.GATv2Conv`, eager and under
:func:`torch.compile`, on random graphs.

GATE's attention is built here exactly as
:class:`~torch_geometric_gate.GATEConv` builds it (the projections
:math:`\mathbf{W}, \mathbf{U}, \mathbf{V}` without bias, the input's
self-loops masked and fresh ones appended, the bias added after the
concatenated heads) and handed to
:func:`torch_geometric_gate.ops.gate_attention` (the chunked kernels on
CPU tensors), so that the numbers do not depend on the layer's own
checks. (The committed ``benchmark/results/cpu-compiled-memory.md`` also
has a column *GATE before*, the attention composed as the chunked path
did before the fused kernel, from the package's private autograd
functions; the script measures only through the public API since.)

Bytes saved for backward are the distinct storages packed by
:func:`torch.autograd.graph.saved_tensors_hooks` during one forward; they
do not depend on the machine's load. Nothing is timed.

Example:
    python benchmark/compiled_memory.py --edges 1e5 1e6 --heads 1 8
"""

import argparse
import functools
import platform
from typing import List

from cli import count_at_least, int_at_least, positive_float, probability

NAMES = ['GATv2', 'GATE', 'compiled GATv2', 'compiled GATE']


def gate_attention_module(in_channels, out_channels, heads, dropout=0.0):
    r"""GATE's layer on a :obj:`[2, E]` edge index, as
    :class:`~torch_geometric_gate.GATEConv` (:obj:`concat=True`,
    :obj:`add_self_loops=True`, no edge features, :obj:`negative_slope=0`)
    builds its attention, handed to
    :func:`~torch_geometric_gate.ops.gate_attention`."""
    import torch

    from torch_geometric_gate.ops import gate_attention

    class GATEAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.heads, self.out_channels = heads, out_channels
            self.dropout = dropout
            width = heads * out_channels
            self.lin = torch.nn.Linear(in_channels, width, bias=False)
            self.lin_src = torch.nn.Linear(in_channels, width, bias=False)
            self.lin_dst = torch.nn.Linear(in_channels, width, bias=False)
            self.att_neighbor = torch.nn.Parameter(
                torch.randn(1, heads, out_channels)
            )
            self.att_self = torch.nn.Parameter(
                torch.randn(1, heads, out_channels)
            )
            self.bias = torch.nn.Parameter(torch.zeros(width))

        def forward(self, x, edge_index):
            H, C, N = self.heads, self.out_channels, x.size(0)
            value = self.lin(x).view(-1, H, C)
            q_src = self.lin_src(x).view(-1, H, C)
            q_dst = self.lin_dst(x).view(-1, H, C)
            loops = torch.arange(N, device=x.device)
            ei = torch.cat([edge_index, loops.repeat(2, 1)], dim=1)
            # As GATEConv leaves the self-loop flags to the kernels:
            out, _ = gate_attention(
                q_src, q_dst, value, ei, self.att_neighbor, self.att_self,
                dropout_p=self.dropout if self.training else 0.0,
                mask_loops_before=edge_index.size(1),
            )  # fmt: skip
            return out.reshape(-1, H * C) + self.bias

    return GATEAttention()


def random_graph(num_nodes: int, num_edges: int, channels: int, seed=0):
    r"""Uniform random edges (self-loops removed: the layers add their
    own) and standard normal features."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(num_nodes, (2, num_edges), generator=gen)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    return torch.randn(num_nodes, channels, generator=gen), edge_index


def measure(num_nodes, num_edges, heads, channels, in_channels, dropout):
    import torch
    from common import saved_bytes
    from torch_geometric.nn import GATv2Conv

    torch.manual_seed(0)
    x, edge_index = random_graph(num_nodes, num_edges, in_channels)
    out_channels = channels // heads
    gate = gate_attention_module(in_channels, out_channels, heads, dropout)
    gatv2 = GATv2Conv(in_channels, out_channels, heads=heads, dropout=dropout)
    compiled_gate = torch.compile(gate, fullgraph=True)
    compiled_gatv2 = torch.compile(gatv2)
    row = {}
    for name, module in [
        ('GATv2', gatv2),
        ('GATE', gate),
        ('compiled GATv2', compiled_gatv2),
        ('compiled GATE', compiled_gate),
    ]:
        module(x, edge_index).sum().backward()  # Compiles.
        row[name] = saved_bytes(functools.partial(module, x, edge_index))
    return edge_index.size(1), row


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(
        description=(
            "Bytes saved for backward by GATE's chunked attention and by "
            'GATv2Conv, eager and under torch.compile, on random graphs.'
        )
    )
    parser.add_argument('--edges', type=count_at_least(1), nargs='+',
                        default=[10**5, 10**6])  # fmt: skip
    parser.add_argument(
        '--degree', type=positive_float, default=20.0,
        help='average in-degree: nodes = edges / degree',
    )  # fmt: skip
    parser.add_argument('--heads', type=int_at_least(1), nargs='+',
                        default=[1, 8])  # fmt: skip
    parser.add_argument('--channels', type=int_at_least(1), default=32,
                        help='heads * out_channels')  # fmt: skip
    parser.add_argument('--in-channels', type=int_at_least(1), default=32)
    parser.add_argument('--dropout', type=probability, default=0.0)
    parser.add_argument('--threads', type=int_at_least(1), default=1)
    args = parser.parse_args(argv)
    for heads in args.heads:
        if args.channels % heads:
            parser.error(
                f'argument --channels: expected a multiple of every --heads '
                f'value, got {args.channels} for --heads {heads}'
            )
    import torch
    from report import command_line, machine_info

    torch.set_num_threads(args.threads)

    print(f'Command: `{command_line("compiled_memory.py", argv)}`\n')
    print('\n'.join(machine_info()) + '\n')
    print(
        f'torch {torch.__version__}, Python {platform.python_version()}, '
        f'{torch.get_num_threads()} thread(s); saved MB = 10^6 bytes of the '
        'distinct storages saved for backward by one training forward '
        f'(input channels {args.in_channels}, heads * out_channels = '
        f'{args.channels}, dropout {args.dropout}, self-loops added).\n'
    )
    names = NAMES
    print(
        '| edges | nodes | in-degree | heads | '
        + ' | '.join(f'{n} MB' for n in names)
        + ' | GATE / GATv2 | compiled GATE / GATE'
        ' | compiled GATE / compiled GATv2 |'
    )
    print('|' + '---|' * (4 + len(names) + 3))
    for edges in args.edges:
        num_nodes = max(int(edges / args.degree), 2)
        for heads in args.heads:
            num_edges, row = measure(
                num_nodes, int(edges), heads, args.channels,
                args.in_channels, args.dropout,
            )  # fmt: skip
            mb = ' | '.join(f'{row[n] / 1e6:.1f}' for n in names)
            print(
                f'| {num_edges} | {num_nodes} | '
                f'{num_edges / num_nodes:.1f} | {heads} | {mb} | '
                f'{row["GATE"] / row["GATv2"]:.2f} | '
                f'{row["compiled GATE"] / row["GATE"]:.2f} | '
                f'{row["compiled GATE"] / row["compiled GATv2"]:.2f} |',
                flush=True,
            )


if __name__ == '__main__':
    main()
