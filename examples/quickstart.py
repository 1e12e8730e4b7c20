r"""GATE vs. GATv2 on a graph where neighbours are noise.

Generates an Erdos-Renyi graph whose node labels are drawn at random and
whose node features are the one-hot encoding of each node's own label (the
paper's self-sufficient task, Sec. 5.1), trains a GATE network and a GATv2
network of the same depth and width on it, and prints both accuracies and the
learned self-attention alpha_vv of each layer (1: the node ignores its
neighbours, 0: it ignores itself).

    python examples/quickstart.py            # about 20 s on one CPU core
    python examples/quickstart.py --readme   # only the table the README quotes
    python examples/quickstart.py --help

It runs on one CPU thread unless :obj:`--threads` says otherwise: the sums
of a parallel CPU kernel may depend on the number of threads, and GATv2's
training here is sensitive enough for that to change its printed numbers on
some machines; one thread also keeps a busy CPU from being oversubscribed.
"""

import argparse
import math
import tempfile
import time


def number(kind, low, high=math.inf, sides='[)'):
    # An argparse type: an int or finite float from low to high, a side '['
    # or ']' including its bound; errors say as in 'an integer >= 0 and < 9',
    # 'a finite number > 0' (high None), for floats 'a number in [0.0, 1.0)'.
    top = math.inf if high is None else high
    finite = 'finite ' * math.isinf(top)
    left, right = sides[0], ')' if finite else sides[1]  # inf fails, as nan
    what = 'an integer' if kind is int else f'a {finite}number'
    if kind is float and high is not None:
        what += f' in {left}{low}, {high}{right}'
    else:
        what += f' >{"=" * (left == "[")} {low}'
        what += '' if finite else f' and <{"=" * (right == "]")} {high}'

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            value = math.nan
        if (low < value if left == '(' else low <= value) and (
            value < top if right == ')' else value <= top
        ):
            return value
        raise argparse.ArgumentTypeError(f'expected {what}, got {text!r}')

    return parse


def make_convs(conv_cls, in_channels, hidden, out_channels, num_layers):
    r"""A stack of attention layers (ReLU in between, :func:`forward`); the
    last layer outputs the class logits, as in the paper.
    """
    import torch

    sizes = [in_channels] + [hidden] * (num_layers - 1) + [out_channels]
    return torch.nn.ModuleList(
        conv_cls(i, o, bias=False) for i, o in zip(sizes[:-1], sizes[1:])
    )


def forward(convs, x, edge_index):
    from torch_geometric_gate.utils import self_loop_attention

    alpha_vv = []
    for i, conv in enumerate(convs):
        x, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
        alpha_vv.append(self_loop_attention(ei, alpha, x.size(0)))
        if i < len(convs) - 1:
            x = x.relu()
    return x, alpha_vv


def make_graph(num_nodes, edge_prob, num_classes, seed, log=True):
    from torch_geometric_gate.datasets import SelfSufficientER

    # Generated here, nothing is downloaded; the folder is removed after.
    with tempfile.TemporaryDirectory() as root:
        dataset = SelfSufficientER(
            root,
            num_nodes=num_nodes,
            edge_prob=edge_prob,
            num_classes=num_classes,
            seed=seed,
            log=log,
        )
        return dataset[0]


def train(convs, data, epochs, lr, desc, progress=True):
    import torch
    import torch.nn.functional as F
    from tqdm import tqdm

    optimizer = torch.optim.Adam(convs.parameters(), lr=lr)
    for _ in tqdm(range(epochs), desc=desc, leave=False, disable=not progress):
        convs.train()
        optimizer.zero_grad()
        out, _ = forward(convs, data.x, data.edge_index)
        loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
        loss.backward()
        optimizer.step()
    convs.eval()
    with torch.no_grad():
        out, alpha_vv = forward(convs, data.x, data.edge_index)
    pred = out.argmax(-1)
    accs = [
        float((pred[m] == data.y[m]).float().mean())
        for m in (data.train_mask, data.test_mask)
    ]
    return loss.item(), accs, alpha_vv


def format_table(results, readme=False):
    r"""The results table; with :obj:`readme=True`, the shorter one that
    README.md quotes (no times, no min/median/max of alpha_vv).
    """
    header = f'{"model":<6} {"loss":>9} {"train acc":>9} {"test acc":>8} '
    if readme:
        header += '  mean alpha_vv per layer'
    else:
        header += f'{"time":>6}   mean alpha_vv per layer (min / median / max)'
    lines = [header]
    for name, (loss, (train_acc, test_acc), alpha_vv, secs) in results.items():
        layers = '  '.join(
            f'L{i + 1}: {a.mean():.3f}'
            + (
                ''
                if readme
                else f' ({a.min():.2f}/{a.median():.2f}/{a.max():.2f})'
            )
            for i, a in enumerate(alpha_vv)
        )
        line = f'{name:<6} {loss:9.2e} {train_acc:9.3f} {test_acc:8.3f} '
        line += '  ' if readme else f'{secs:5.1f}s   '
        lines.append(line + layers)
    return '\n'.join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    # From 4 nodes, a 2:1:1 split has a test node:
    parser.add_argument('--num-nodes', type=number(int, 4), default=1000)
    parser.add_argument(
        '--edge-prob', type=number(float, 0.0, 1.0, '[]'), default=0.01
    )
    parser.add_argument('--num-classes', type=number(int, 2), default=8)
    parser.add_argument('--num-layers', type=number(int, 1), default=5)
    parser.add_argument('--hidden', type=number(int, 1), default=64)
    parser.add_argument('--epochs', type=number(int, 1), default=200)
    parser.add_argument(
        '--lr', type=number(float, 0.0, sides='()'), default=0.005
    )
    parser.add_argument('--seed', type=number(int, 0, 2**64), default=0)
    parser.add_argument(
        '--threads',
        type=number(int, 1),
        default=1,
        help='CPU threads of torch (the printed numbers are those of one '
        'thread; another count may change their last digits)',
    )
    parser.add_argument(
        '--readme',
        action='store_true',
        help='print only the table that README.md quotes (no times, no '
        'min/median/max of alpha_vv, no progress bars)',
    )
    args = parser.parse_args(argv)
    if args.num_classes > args.num_nodes:
        parser.error(
            f'argument --num-classes: expected at most --num-nodes '
            f'({args.num_nodes}), got {args.num_classes}'
        )
    return args


def main():
    args = parse_args()

    import torch
    from torch_geometric.nn import GATv2Conv

    from torch_geometric_gate import GATEConv

    torch.set_num_threads(args.threads)

    data = make_graph(
        args.num_nodes,
        args.edge_prob,
        args.num_classes,
        args.seed,
        log=not args.readme,
    )
    if not args.readme:
        print(
            f'Graph: {data.num_nodes} nodes, {data.num_edges} edges, '
            f'{args.num_classes} random classes, one-hot label features; '
            f'{args.num_layers} layers of width {args.hidden}, '
            f'{args.epochs} epochs of Adam (lr={args.lr}); '
            f'{torch.get_num_threads()} CPU thread(s).'
        )

    results = {}
    for name, conv_cls in [('GATE', GATEConv), ('GATv2', GATv2Conv)]:
        torch.manual_seed(args.seed)
        convs = make_convs(
            conv_cls,
            data.num_features,
            args.hidden,
            args.num_classes,
            args.num_layers,
        )
        t = time.perf_counter()
        results[name] = train(
            convs, data, args.epochs, args.lr, name, not args.readme
        )
        results[name] += (time.perf_counter() - t,)

    if args.readme:
        print(format_table(results, readme=True))
        return
    print('\n' + format_table(results))
    print(
        '\nalpha_vv = 1: the node ignores its neighbours; 0: it ignores '
        'itself. The labels here need no aggregation at all.\ntime: the '
        "training's wall time; GATE's includes compiling its attention "
        'kernels on their first call (seconds, once per process).'
    )


if __name__ == '__main__':
    main()
