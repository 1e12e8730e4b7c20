r"""Plots training-step time and memory against edges (log-log) from the
CSVs of :obj:`benchmark/kernels.py` (memory: the peak on CUDA, the bytes
saved for backward on CPU) and :obj:`benchmark/pair.py` (the bytes saved
for backward), one line per layer and kernel::

    python benchmark/plot.py benchmark/results/gpu-kernels.csv \
        --out gpu-kernels.png

A CSV of another kind, or one without a finished training-step row, is a
usage error (exit code 2), not an empty plot.
"""

import argparse
import csv

from plotting import PLOT_COLUMNS, plot, plot_points


def read_points(path: str) -> list:
    r"""The plot points of one results CSV; :class:`ValueError` naming the
    file when it is not a CSV of :obj:`kernels.py` or :obj:`pair.py`, or
    has no finished training-step row."""
    with open(path, newline='', encoding='utf-8-sig') as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        columns = set(reader.fieldnames or ())
    kind = next(
        (k for k, need in PLOT_COLUMNS.items() if need <= columns), None
    )
    if kind is None:
        expected = '; '.join(
            f'benchmark/{k}: {", ".join(sorted(c))}'
            for k, c in PLOT_COLUMNS.items()
        )
        raise ValueError(
            f'{path} is not a results CSV of benchmark/kernels.py or '
            f'benchmark/pair.py (expected the columns of {expected}; '
            f'found {", ".join(sorted(columns)) or "no header"})'
        )
    points = plot_points(rows)
    if not points:
        raise ValueError(
            f'{path} has no finished training-step row of benchmark/{kind} '
            f'to plot ({len(rows)} rows)'
        )
    return points


def main(argv=None) -> list:
    parser = argparse.ArgumentParser(
        description=(
            'Plots training-step time and memory against edges (log-log) '
            'from the CSVs of benchmark/kernels.py and benchmark/pair.py, '
            'one line per layer and kernel.'
        )
    )
    parser.add_argument('csv', nargs='+', help='results CSVs')
    parser.add_argument('--out', required=True, help='the PNG to write')
    args = parser.parse_args(argv)
    points = []
    for path in args.csv:
        try:
            points += read_points(path)
        except (OSError, ValueError, KeyError) as err:
            parser.error(str(err))
    plot(points, args.out)
    return points


if __name__ == '__main__':
    main()
