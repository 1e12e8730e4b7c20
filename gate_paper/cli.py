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
