r"""Argument types with ranges for the ``gate_paper`` scripts: a value out
of range is a one-line usage error that
names the flag and the expected range (exit code 2), not a silently
different run or a traceback."""

import argparse
import math
import re
from typing import Callable, Optional


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


def commit_hash(text: str) -> str:
    r"""An argparse type: the full hash of a commit (SHA-1 or SHA-256)."""
    if not re.fullmatch(r'[0-9a-f]{40}|[0-9a-f]{64}', text):
        raise argparse.ArgumentTypeError(
            'expected the full hash of the commit (40 hex digits: git '
            f'rev-parse HEAD), got {text!r}'
        )
    return text


def device_name(text: str) -> str:
    r"""An argparse type: the device of the runs, ``auto``, ``cpu``,
    ``cuda`` or ``cuda:N`` (whether it is there: :func:`check_device`,
    after parsing)."""
    kind, colon, index = text.partition(':')
    if (kind in ('auto', 'cpu') and not colon) or (
        kind == 'cuda' and (not colon or index.isdecimal())
    ):
        return text
    raise argparse.ArgumentTypeError(
        f"expected 'auto', 'cpu', 'cuda' or 'cuda:N' (N >= 0), got {text!r}"
    )


def check_device(parser: argparse.ArgumentParser, device: str):
    r"""A usage error unless the device ``device`` (of :func:`device_name`)
    is on this machine: ``cuda`` without a CUDA device, or ``cuda:N`` past
    the last one, would fail every run (it imports torch for those)."""
    if not device.startswith('cuda'):
        return
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if int(device.partition(':')[2] or 0) >= count:
        expected = (
            f"'cuda:0' to 'cuda:{count - 1}' ({count} CUDA device(s) here)"
            if count
            else "'cpu' (no CUDA device is available here)"
        )
        parser.error(f'argument --device: expected {expected}, got {device!r}')


def check_heads(parser: argparse.ArgumentParser, hidden: int, heads: int):
    r"""A usage error unless ``hidden`` (``--hidden``) divides into
    ``heads`` (``--heads``) heads of equal width."""
    if hidden % heads:
        parser.error(
            f'argument --heads: --hidden ({hidden}) must be divisible by '
            f'--heads ({heads})'
        )


def outputs(args, stem: str) -> str:
    r"""Where a script's invocation wrote: its run files (``--out-dir``)
    and tables (``--tables-dir``, ``<stem>.md`` and ``<stem>_*.csv``)."""
    import os

    return (
        f'Run files (one JSON file per run): {args.out_dir}{os.sep}\n'
        f'Tables: {os.path.join(args.tables_dir, stem + ".md")} and '
        f'{os.path.join(args.tables_dir, stem + "_*.csv")}'
    )
