r"""GATE against GATv2 on a heterophilous graph: Minesweeper (or Tolokers)
of Platonov et al. (ICLR 2023), one split, test ROC AUC and the attention
each layer learned.

Both networks are the same stack of attention layers (ReLU in between, the
last layer outputs the two class logits), with GATEConv or PyG's GATv2Conv.
Each trains with Adam, full batch, on the split's training nodes; the
reported test ROC AUC is the one at the epoch of best validation ROC AUC.
The loss and the mean self-attention alpha_vv of every layer (1: the nodes
ignore their neighbours, 0: they ignore themselves) are the last epoch's;
--plot also saves alpha_vv's histogram per layer.

The data comes through PyG's HeterophilousGraphDataset under
--data-root/heterophilous (by default the repository's data/ folder, or
$GATE_DATA_ROOT), downloaded there on first use::

    python examples/heterophilous.py
    python examples/heterophilous.py --dataset Tolokers --num-layers 2 \
        --plot plots
"""

import argparse
import contextlib
import io
import math
import os
import os.path as osp
import shutil
import zipfile

DATASETS = ('Minesweeper', 'Tolokers')  # the two-class sets (ROC AUC)
DEFAULT_ROOT = os.environ.get('GATE_DATA_ROOT') or osp.normpath(
    osp.join(osp.dirname(osp.realpath(__file__)), '..', 'data')
)


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


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument(
        '--data-root',
        default=DEFAULT_ROOT,
        help='the data root: the dataset is read from (or downloaded to) '
        'DATA_ROOT/heterophilous (default: $GATE_DATA_ROOT, else data/ of '
        'the repository)',
    )
    parser.add_argument('--dataset', choices=DATASETS, default='Minesweeper')
    parser.add_argument('--split', type=int, choices=range(10), default=0)
    parser.add_argument('--num-layers', type=number(int, 1), default=4)
    parser.add_argument('--hidden-channels', type=number(int, 1), default=64)
    parser.add_argument('--epochs', type=number(int, 1), default=200)
    parser.add_argument(
        '--lr', type=number(float, 0, None, '()'), default=0.005
    )
    # In torch.manual_seed's range:
    parser.add_argument('--seed', type=number(int, 0, 2**64), default=0)
    parser.add_argument(
        '--plot',
        metavar='FOLDER',
        help='save the alpha_vv histograms as FOLDER/<dataset>_<model>.png '
        '(the folder is created if missing; default: no plots)',
    )
    args = parser.parse_args(argv)
    if args.plot is not None:  # checked now, not after the training
        if osp.exists(args.plot) and not osp.isdir(args.plot):
            parser.error(f'argument --plot: {args.plot!r} is not a folder')
        try:
            os.makedirs(args.plot, exist_ok=True)
        except OSError as e:
            parser.error(f'argument --plot: cannot create {args.plot!r} ({e})')
        if not os.access(args.plot, os.W_OK):
            parser.error(f'argument --plot: {args.plot!r} is not writable')
    return args


def load(data_root, name, split):
    from torch_geometric.datasets import HeterophilousGraphDataset

    root = osp.join(data_root, 'heterophilous')
    raw = osp.join(root, name.lower(), 'raw', f'{name.lower()}.npz')
    # The outermost folder that a download makes (from raw/ up), if any:
    created, had_raw = osp.abspath(osp.dirname(raw)), osp.isfile(raw)
    while not osp.isdir(osp.dirname(created)):
        created = osp.dirname(created)
    created = None if osp.exists(created) else created
    if not had_raw:
        print(f'Downloading {name} into {osp.dirname(raw)}')
    try:  # PyG's "Processing...", "Done!" lines go to stderr: not shown
        with contextlib.redirect_stderr(io.StringIO()):
            dataset = HeterophilousGraphDataset(root, name)
    except (EOFError, KeyError, ValueError, zipfile.BadZipFile) as e:
        raise OSError(  # a file cut short, as by an interrupted download
            f"'{raw}' is not a whole {name} file ({type(e).__name__}: {e}); "
            'remove it to download it again, or copy a whole one there'
        ) from e
    except OSError as e:  # no network: leave nothing half-written
        if had_raw:  # nothing was downloaded: processing it failed
            processed = osp.join(root, name.lower(), 'processed')
            raise OSError(
                f"could not process '{raw}' ({type(e).__name__}: {e}); PyG "
                f"writes the processed dataset into '{processed}': point "
                f'--data-root (or GATE_DATA_ROOT) at a writable copy'
            ) from e
        if osp.isfile(raw):
            os.remove(raw)
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise FileNotFoundError(
            f'could not download {name} ({type(e).__name__}: {e}); '
            f"expected '{raw}' (PyG's HeterophilousGraphDataset layout). "
            f'Without network, copy {name.lower()}.npz there, or point '
            f'--data-root (or GATE_DATA_ROOT) at a folder that holds '
            f'heterophilous/{name.lower()}/raw/{name.lower()}.npz'
        ) from e
    data = dataset[0]
    for key in ('train_mask', 'val_mask', 'test_mask'):
        data[key] = data[key][:, split]
    return data


def forward(convs, x, edge_index, return_alpha_vv=False):
    from torch_geometric_gate.utils import self_loop_attention

    alpha_vv = []
    for i, conv in enumerate(convs):
        if return_alpha_vv:
            x, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
            alpha_vv.append(self_loop_attention(ei, alpha, x.size(0)))
        else:
            x = conv(x, edge_index)
        if i < len(convs) - 1:
            x = x.relu()
    return (x, alpha_vv) if return_alpha_vv else x


def roc_auc(out, y, mask):
    from sklearn.metrics import roc_auc_score

    # The logit difference ranks as the probability of class 1 does,
    # without its float32 rounding to 1.0 for the most confident nodes.
    score = out[mask, 1].double() - out[mask, 0].double()
    if not bool(score.isfinite().all()):  # a diverged model
        return float('nan')
    return float(roc_auc_score(y[mask].numpy(), score.numpy()))


def train(convs, data, epochs, lr):
    import torch
    import torch.nn.functional as F

    optimizer = torch.optim.Adam(convs.parameters(), lr=lr)
    best_val, test_at_best = float('-inf'), float('nan')
    for _ in range(epochs):
        convs.train()
        optimizer.zero_grad()
        out = forward(convs, data.x, data.edge_index)
        loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
        loss.backward()
        optimizer.step()
        convs.eval()
        with torch.no_grad():
            out = forward(convs, data.x, data.edge_index)
        val = roc_auc(out, data.y, data.val_mask)
        if val > best_val:
            best_val, test_at_best = val, roc_auc(out, data.y, data.test_mask)
    with torch.no_grad():
        _, alpha_vv = forward(convs, data.x, data.edge_index, True)
    return float(loss.detach()), best_val, test_at_best, alpha_vv


def main():
    args = parse_args()

    import torch
    from torch_geometric.nn import GATv2Conv

    from torch_geometric_gate import GATEConv

    try:
        data = load(args.data_root, args.dataset, args.split)
    except OSError as e:  # no data, or it cannot be processed
        raise SystemExit(f'error: {e}') from None
    print(
        f'{args.dataset}, split {args.split}: {data.num_nodes} nodes, '
        f'{data.num_edges} edges, train/val/test '
        f'{int(data.train_mask.sum())}/{int(data.val_mask.sum())}/'
        f'{int(data.test_mask.sum())}; {args.num_layers} layers of width '
        f'{args.hidden_channels}, {args.epochs} epochs of Adam '
        f'(lr={args.lr})'
    )
    print(f'{"model":<6} {"loss":>7} {"val AUC":>8} {"test AUC":>8}   '
          f'mean alpha_vv per layer')  # fmt: skip
    figures = {}
    sizes = ([data.num_features] + [args.hidden_channels] *
             (args.num_layers - 1) + [2])  # fmt: skip
    for name, conv_cls in (('GATE', GATEConv), ('GATv2', GATv2Conv)):
        torch.manual_seed(args.seed)
        convs = torch.nn.ModuleList(
            conv_cls(i, o, bias=False) for i, o in zip(sizes[:-1], sizes[1:])
        )
        loss, val, test, alpha_vv = train(convs, data, args.epochs, args.lr)
        layers = '  '.join(
            f'L{i + 1}: {float(a.mean()):.3f}' for i, a in enumerate(alpha_vv)
        )
        print(f'{name:<6} {loss:7.4f} {val:8.4f} {test:8.4f}   {layers}')
        figures[name] = alpha_vv
    if args.plot is not None:
        import matplotlib.pyplot as plt

        from torch_geometric_gate.utils import plot_self_attention_histogram

        for name, alpha_vv in figures.items():
            path = osp.join(args.plot, f'{args.dataset}_{name}.png')
            fig = plot_self_attention_histogram(
                alpha_vv, path, title=f'{name} on {args.dataset}'
            )
            plt.close(fig)
            print(f'Saved {path}')


if __name__ == '__main__':
    main()
