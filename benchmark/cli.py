r"""The benchmark scripts' command line, light enough for ``--help``:
the names of the layers, kernels, dtypes and graphs the options take, the
argument types with ranges and the options the pair-style benchmarks share.
It imports no torch (nor PyG, pandas, matplotlib): a script parses its
arguments first and imports those after (:obj:`common` re-exports these
names with the measuring code).

The scripts import it as :obj:`cli`, beside :obj:`common`.
"""

import argparse
import math
import os
from typing import Callable, Optional, Sequence

from report import output_folder

LAYERS = ('GATE', 'GATv2')
GATE_KERNELS = ('reference', 'chunked', 'triton')
#: The dtypes the scripts take, by name (:data:`common.DTYPES` maps them to
#: torch's).
DTYPE_NAMES = ('float32', 'bfloat16')
REAL_GRAPHS = {
    'cora': ('Planetoid', 'Cora'),
    'minesweeper': ('heterophilous', 'Minesweeper'),
    'tolokers': ('heterophilous', 'Tolokers'),
}
#: Random graphs of the size of OGB's graphs: nodes, edges, input features.
SIZED_GRAPHS = {
    'arxiv-size': (169343, 1166243, 128),
    'products-size': (2449029, 123718280, 100),
}
#: The data root of the real graphs, as the examples and gate_paper's
#: scripts use it (they download into it): ``$GATE_DATA_ROOT``, else
#: ``data``.
DEFAULT_DATA = os.environ.get('GATE_DATA_ROOT') or 'data'
#: What GATE's eager CPU calls run: Inductor's compiled loops where they
#: apply (the default) or the chunked ATen loops.
EAGER_LOOPS = ('compiled', 'chunks')


def graph_name(text: str) -> str:
    r"""An :mod:`argparse` type: :obj:`random-N` or :obj:`powerlaw-N` (a
    random graph of about :obj:`N >= 100` edges and :obj:`N / 10` nodes),
    a graph of :data:`SIZED_GRAPHS` or a real graph of :data:`REAL_GRAPHS`.
    """
    if text in REAL_GRAPHS or text in SIZED_GRAPHS:
        return text
    kind, _, size = text.partition('-')
    if kind in ('random', 'powerlaw'):
        try:
            num_edges = float(size)
        except ValueError:
            num_edges = math.nan
        if (
            math.isfinite(num_edges)
            and num_edges >= 100
            and num_edges % 1 == 0
        ):
            return text
    raise argparse.ArgumentTypeError(
        f'expected random-N or powerlaw-N with an integer N >= 100 edges '
        f'(e.g. random-1e4), or one of '
        f'{sorted(SIZED_GRAPHS) + sorted(REAL_GRAPHS)}, got {text!r}'
    )


def file_stem(text: str) -> str:
    r"""An argparse type: the file name stem of a script's results
    (:obj:`--name`; :obj:`<stem>.csv` and :obj:`<stem>.md` in
    :obj:`--out`): not empty, no folder in it, not starting with a dot
    (hidden files, or a folder above :obj:`--out`)."""
    if not text or text.startswith('.') or '/' in text or os.sep in text:
        raise argparse.ArgumentTypeError(
            'expected a file name stem (not empty, without a folder, not '
            f'starting with a dot, e.g. kernels-1), got {text!r}'
        )
    return text


# Command line ################################################################
# Argument types with ranges: a value out of range is a one-line usage
# error that names the flag and the expected range (exit code 2).


def int_at_least(minimum: int) -> Callable[[str], int]:
    r"""An argparse type: an integer ``>= minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(
                f'expected an integer >= {minimum}, got {text!r}'
            )
        return value

    parse.__name__ = f'int>={minimum}'
    return parse


def float_in(
    low: Optional[float] = None,
    high: Optional[float] = None,
    low_open: bool = False,
) -> Callable[[str], float]:
    r"""An argparse type: a finite number in ``[low, high]`` (``(low,
    high]`` with ``low_open=True``; :obj:`None`: no bound). Its usage error
    says ``a finite number in (low, inf)`` when a side has no bound, never
    an infinite bound that looks allowed."""
    left = '(' if low_open or low is None else '['
    right = ')' if high is None else ']'
    expected = (
        f'a {"finite " if low is None or high is None else ""}number in '
        f'{left}{"-inf" if low is None else low}, '
        f'{"inf" if high is None else high}{right}'
    )

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = math.isfinite(value)
        if ok and low is not None:
            ok = value > low if low_open else value >= low
        if ok and high is not None:
            ok = value <= high
        if not ok:
            raise argparse.ArgumentTypeError(
                f'expected {expected}, got {text!r}'
            )
        return value

    parse.__name__ = 'float'
    return parse


positive_float = float_in(0.0, low_open=True)
probability = float_in(0.0, 1.0)
#: The :obj:`--scale` of the sized graphs: a fraction in ``(0, 1]``.
fraction = float_in(0.0, 1.0, low_open=True)


def count_at_least(minimum: int) -> Callable[[str], int]:
    r"""An argparse type: a whole number ``>= minimum``, also written as a
    float (``1e5``)."""

    def parse(text: str) -> int:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value % 1 == 0 and value >= minimum):
            raise argparse.ArgumentTypeError(
                f'expected a whole number >= {minimum} (e.g. 1e5), got '
                f'{text!r}'
            )
        return int(value)

    parse.__name__ = f'count>={minimum}'
    return parse


def add_shape_args(
    parser,
    graphs: Sequence[str],
    hidden: int = 64,
    channels: int = 64,
    channels_help: str = 'input features of the random graphs',
):
    r"""The options of the layers' shapes: :obj:`--graphs`, :obj:`--heads`,
    :obj:`--hidden` and, unless :obj:`channels` is :obj:`None` (a script
    that reads no features), :obj:`--channels` (checked by
    :func:`parse_checked`)."""
    parser.add_argument(
        '--graphs', nargs='+', type=graph_name, default=list(graphs)
    )
    parser.add_argument(
        '--heads', nargs='+', type=int_at_least(1), default=[1, 8]
    )
    parser.add_argument(
        '--hidden',
        type=int_at_least(1),
        default=hidden,
        help='heads * out_channels (a multiple of --heads)',
    )
    if channels is not None:
        parser.add_argument(
            '--channels',
            type=int_at_least(1),
            default=channels,
            help=channels_help,
        )


def add_layer_args(
    parser,
    graphs: Sequence[str],
    reps: int = 5,
    warmup: int = 1,
    channels_help: str = 'input features of the random graphs',
    channels: Optional[int] = 64,
):
    r"""The options the pair-style benchmarks share: those of
    :func:`add_shape_args` (:obj:`channels`: :obj:`--channels`' default,
    :obj:`None`: no such option), :obj:`--warmup`, :obj:`--reps`,
    :obj:`--threads`, :obj:`--data-root` and :obj:`--out` (checked by
    :func:`parse_checked`)."""
    add_shape_args(
        parser, graphs, channels=channels, channels_help=channels_help
    )
    parser.add_argument('--warmup', type=int_at_least(0), default=warmup)
    parser.add_argument(
        '--reps', type=int_at_least(1), default=reps, help='timed steps'
    )
    parser.add_argument(
        '--threads',
        type=int_at_least(1),
        default=None,
        help="torch's threads (default: torch's own choice)",
    )
    parser.add_argument('--data-root', default=DEFAULT_DATA)
    parser.add_argument('--out', default='benchmark/results')


def parse_checked(parser, argv=None):
    r"""Parses :obj:`argv`; a usage error unless :obj:`--hidden` splits into
    every :obj:`--heads` value and :obj:`--out` is a writable folder. Sets
    torch's threads to :obj:`--threads` where given (so that no script
    offers the option and forgets it)."""
    args = parser.parse_args(argv)
    for heads in args.heads:
        if args.hidden % heads:
            parser.error(
                f'argument --hidden: expected a multiple of every --heads '
                f'value, got {args.hidden} for --heads {heads}'
            )
    output_folder(parser, args.out)
    if getattr(args, 'threads', None):
        import torch

        torch.set_num_threads(args.threads)
    return args


#: The help of a :obj:`--device` option whose default is
#: :func:`default_device`'s.
DEVICE_HELP = 'default: cuda when available, else cpu'


def device_name(text: str) -> str:
    r"""An argparse type: a device the scripts run on, :obj:`cpu`,
    :obj:`cuda` or :obj:`cuda:N` (whether it is there:
    :func:`check_devices`, after parsing)."""
    kind, colon, index = text.partition(':')
    if (kind == 'cpu' and not colon) or (
        kind == 'cuda' and (not colon or index.isdecimal())
    ):
        return text
    raise argparse.ArgumentTypeError(
        f"expected 'cpu', 'cuda' or 'cuda:N' (N >= 0), got {text!r}"
    )


def check_devices(parser, devices: Sequence[str], flag: str = '--devices'):
    r"""A usage error (:meth:`parser.error`) when a device of
    :func:`device_name` is not on this machine: :obj:`cuda` without a
    CUDA device, or :obj:`cuda:N` past the last one (it imports torch)."""
    cuda = [d for d in devices if d.startswith('cuda')]
    if not cuda:
        return
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for device in cuda:
        index = int(device.partition(':')[2] or 0)
        if index >= count:
            expected = (
                f"'cpu', 'cuda' or 'cuda:0' to 'cuda:{count - 1}' ({count} "
                f'CUDA device(s) here)'
                if count
                else "'cpu' (no CUDA device is available here)"
            )
            parser.error(
                f'argument {flag}: expected {expected}, got {device!r}'
            )


def default_device() -> str:
    r""":obj:`'cuda'` when available, else :obj:`'cpu'`: the default of the
    scripts' :obj:`--device` options, filled in after parsing (it imports
    torch)."""
    import torch

    return 'cuda' if torch.cuda.is_available() else 'cpu'
