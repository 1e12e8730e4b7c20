r"""Plots training-step time and memory against edge count, one line per
layer and kernel, from the CSVs of :obj:`benchmark/conv.py`: the kernel
suite's (:obj:`--kernels`, :obj:`*-kernels.csv`: memory is the peak on
CUDA, the bytes saved for backward on CPU) and the CPU runs'
(:obj:`conv.csv` format: the :obj:`train` rows; memory is the bytes saved
for backward, or :obj:`--memory rss` for the peak RSS).

Run from the repository root, e.g.::

    python benchmark/plot.py benchmark/results/cpu-eager.csv \
        benchmark/results/cpu-large.csv --out /tmp/cpu-steps.png
"""

import argparse
import csv
import os
import sys
from typing import Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conv import plot_steps, suite_series  # noqa: E402


def _float(value: str) -> Optional[float]:
    return float(value) if value not in ('', None) else None


MEMORY = {'saved': 'saved for backward MB', 'rss': 'peak RSS MB'}


def cpu_points(rows: List[Dict[str, str]], memory: str) -> List[dict]:
    r"""The :obj:`train` rows of a :obj:`conv.csv` as plot points (GATE and
    GATv2, eager and compiled)."""
    points = []
    for r in rows:
        if r.get('mode') != 'train' or r.get('concat') not in ('True', 'true'):
            continue
        for layer in ('gate', 'gatv2'):
            mb = _float(r.get(f'{layer}_{memory}_mb', ''))
            points.append(
                dict(
                    panel=f'{r["device"]} H={r["heads"]} float32',
                    line=f'{"GATE" if layer == "gate" else "GATv2"} '
                    f'{r["variant"]}',
                    edges=int(r['num_edges']),
                    ms=float(r[f'{layer}_ms']),
                    mb=mb,
                    memory=MEMORY[memory],
                )
            )
    return points


def main(argv=None) -> List[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('csv', nargs='+')
    parser.add_argument('--out', required=True, help='the PNG to write')
    parser.add_argument(
        '--memory',
        choices=['saved', 'rss'],
        default='saved',
        help='the memory column of conv.csv files',
    )
    args = parser.parse_args(argv)
    points: List[dict] = []
    for path in args.csv:
        with open(path) as f:
            rows = list(csv.DictReader(f))
        if rows and 'layer' in rows[0]:  # The kernel suite.
            points += suite_series(rows)
        else:
            points += cpu_points(rows, args.memory)
    plot_steps(points, args.out)
    return points


if __name__ == '__main__':
    main()
