r"""Plots of the benchmarks' results: the points of a :obj:`kernels.py` or
:obj:`pair.py` CSV, and step time and memory against edges (log-log)."""

from typing import Dict, List

from cli import LAYERS

#: The columns of the results CSVs that :func:`plot_points` reads.
PLOT_COLUMNS = {
    'kernels.py': {'device', 'heads', 'dtype', 'layer', 'kernel', 'status',
                   'num_edges', 'step_ms', 'peak_mb', 'saved_mb'},
    'pair.py': {'device', 'heads', 'mode', 'variant', 'num_edges', 'gate_ms',
                'gatv2_ms', 'gate_saved_mb', 'gatv2_saved_mb'},
}  # fmt: skip


def plot_points(rows: List[dict]) -> List[dict]:
    r"""The finished training-step rows of :obj:`kernels.py` (memory: the
    peak on CUDA, the bytes saved for backward on CPU; an :obj:`EdgeIndex`
    input a line of its own) or :obj:`pair.py`
    (concatenated heads; the bytes saved for backward, GATE and GATv2 each
    a line) as
    :func:`plot` points."""

    def number(value):
        return None if value in (None, '') else float(value)

    out = []
    for r in rows:
        if 'layer' in r and r.get('status') == 'ok':
            cuda = r['device'].startswith('cuda')
            line = f'{r["layer"]} {r["kernel"]}'
            if r.get('input') not in (None, '', 'plain'):  # An EdgeIndex.
                line += f' ({r["input"]})'
            out.append(dict(
                panel=f'{r["device"]} H={r["heads"]} {r["dtype"]}',
                line=line, edges=int(r['num_edges']),
                ms=float(r['step_ms']),
                mb=number(r.get('peak_mb' if cuda else 'saved_mb')),
                memory='peak MiB' if cuda else 'saved for backward MiB',
            ))  # fmt: skip
        elif (
            'gate_ms' in r
            and r.get('mode') == 'train'
            and str(r.get('concat')).lower() == 'true'
        ):
            for k in LAYERS:
                out.append(dict(
                    panel=f'{r["device"]} H={r["heads"]}',
                    line=f'{k} {r["variant"]}', edges=int(r['num_edges']),
                    ms=float(r[f'{k.lower()}_ms']),
                    mb=number(r.get(f'{k.lower()}_saved_mb')),
                    memory='saved for backward MiB',
                ))  # fmt: skip
    return out


def plot(points: List[dict], path: str):
    r"""Step time and memory against edges (log-log), one column per
    :obj:`panel`, one line per :obj:`line`; each point a dict with
    :obj:`panel`, :obj:`line`, :obj:`edges`, :obj:`ms`, :obj:`mb` (or
    :obj:`None`) and :obj:`memory` (the memory axis' label). Raises
    :class:`ValueError` when there is nothing to plot."""
    if not points:
        raise ValueError('no points to plot')
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    panels = sorted({p['panel'] for p in points})
    fig, axes = plt.subplots(
        2, len(panels), figsize=(4.5 * len(panels), 7), squeeze=False
    )
    for col, panel in enumerate(panels):
        mine = [p for p in points if p['panel'] == panel]
        label = ' / '.join(sorted({p['memory'] for p in mine}))
        for row, (key, ylabel) in enumerate(
            (('ms', 'step ms'), ('mb', label))
        ):
            ax = axes[row][col]
            lines: Dict[str, list] = {}
            for p in mine:
                if p[key] is not None:
                    lines.setdefault(p['line'], []).append(
                        (p['edges'], p[key])
                    )
            if not lines:
                ax.set_axis_off()
                ax.set_title(f'{panel}: no {ylabel}')
                continue
            for i, (name, pts) in enumerate(sorted(lines.items())):
                ax.plot(*zip(*sorted(pts)), marker='o', color=f'C{i}',
                        label=name)  # fmt: skip
            ax.set(xscale='log', yscale='log', xlabel='edges', ylabel=ylabel,
                   title=panel)  # fmt: skip
            ax.grid(True, which='both', alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
