"""Draws the benchmark page's figures from the committed results.

- ``docs/source/_static/benchmark-cpu.png``: GATE's training step time and
  bytes saved for backward over GATv2Conv's, one CPU thread, eager and
  compiled (``benchmark/results/cpu-pair.csv``).
- ``docs/source/_static/benchmark-gpu.png``: the same on one H100 with the
  Triton kernels, eager against eager GATv2Conv and compiled against
  compiled GATv2Conv (``benchmark/results/h100-kernels-large.csv``,
  ``h100-kernels-compiled.csv``).

Run from the repository root after a benchmark rerun::

    python docs/source/_scripts/plot_benchmark.py
"""

import csv
import os.path as osp

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402

# Shown at about 740 pixels wide on the page: large type.
plt.rcParams.update({'font.size': 12, 'axes.titlesize': 12})

HERE = osp.dirname(osp.abspath(__file__))
RESULTS = osp.join(HERE, '..', '..', '..', 'benchmark', 'results')
STATIC = osp.join(HERE, '..', '_static')
GRAPHS = {
    'random-1e5': 'random $10^5$',
    'random-1e6': 'random $10^6$',
    'arxiv-size': 'arxiv-size',
    'cora': 'Cora',
}
COLORS = ('#4477aa', '#ee7733', '#228833')


def read(name, **where):
    with open(osp.join(RESULTS, name), newline='') as f:
        return [
            r
            for r in csv.DictReader(f)
            if all(r[k] == v for k, v in where.items())
        ]


def bars(ax, groups, series, title):
    r"""Horizontal bars: one group per ``(label, {series: value})`` of
    :obj:`groups`, one bar per series; a line at 1 (GATv2Conv)."""
    height = 0.8 / len(series)
    for i, name in enumerate(series):
        ys = [g - 0.4 + (i + 0.5) * height for g in range(len(groups))]
        values = [values.get(name) for _, values in groups]
        ax.barh(
            [y for y, v in zip(ys, values) if v is not None],
            [v for v in values if v is not None],
            height=height * 0.9,
            color=COLORS[i],
            label=name,
        )
        for y, v in zip(ys, values):
            if v is not None:
                ax.text(v + 0.02, y, f'{v:.2f}', va='center', fontsize=10)
    ax.axvline(1.0, color='black', linewidth=1)
    ax.set_yticks(range(len(groups)), [label for label, _ in groups])
    if not ax.yaxis_inverted():  # shared axes: invert once
        ax.invert_yaxis()
    ax.set_title(title)
    ax.set_xlim(0, 1.5)
    ax.grid(axis='x', alpha=0.3)


def cpu_figure(path):
    rows = read('cpu-pair.csv', mode='train')
    keys = list(dict.fromkeys((r['graph'], r['heads']) for r in rows))
    time, saved = [], []
    for graph, heads in keys:
        label = f'{GRAPHS.get(graph, graph)}\nheads {heads}'
        found = {
            r['variant']: r
            for r in rows
            if (r['graph'], r['heads']) == (graph, heads)
        }
        time.append((label, {k: float(r['ratio']) for k, r in found.items()}))
        saved.append((label, {'eager': float(found['eager']['saved_ratio'])}))
    fig, axes = plt.subplots(1, 2, figsize=(8, 5.5), sharey=True)
    bars(axes[0], time, ['eager', 'compiled'], 'step time')
    bars(axes[1], saved, ['eager'], 'saved for backward')
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc='lower center', ncol=len(labels))
    fig.suptitle(
        'CPU, one thread (AMD EPYC): GATEConv / GATv2Conv\n'
        '(below 1: GATE is faster or smaller; Cora with 1,433 features)',
    )
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def gpu_figure(path):
    eager = read('h100-kernels-large.csv', kernel='triton', status='ok')
    compiled = read(
        'h100-kernels-compiled.csv', kernel='triton-compiled', status='ok'
    )
    dtypes = ['float32', 'bfloat16']
    panels = (
        (eager, 'time_vs_gatv2_eager', 'step time'),
        (compiled, 'time_vs_gatv2_compiled', 'step, compiled'),
        (eager, 'saved_vs_gatv2_eager', 'saved for backward'),
    )
    fig, axes = plt.subplots(1, 3, figsize=(8, 5), sharey=True)
    for ax, (rows, column, title) in zip(axes, panels):
        keys = list(
            dict.fromkeys((r['graph'], r['heads']) for r in rows if r[column])
        )
        groups = [
            (
                f'{GRAPHS.get(graph, graph)}\nheads {heads}',
                {
                    r['dtype']: float(r[column])
                    for r in rows
                    if (r['graph'], r['heads']) == (graph, heads) and r[column]
                },
            )
            for graph, heads in keys
        ]
        bars(ax, groups, dtypes, title)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc='lower center', ncol=len(labels))
    fig.suptitle(
        'One NVIDIA H100 80GB, Triton kernels: GATEConv / GATv2Conv\n'
        '(compiled: both compiled; graphs of about $10^6$ edges)',
    )
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    cpu_figure(osp.join(STATIC, 'benchmark-cpu.png'))
    gpu_figure(osp.join(STATIC, 'benchmark-gpu.png'))


if __name__ == '__main__':
    main()
