r"""Draws Table 2 (neighbour-dependent) as a figure: per row (k, L) and
model, the mean test accuracy at the epoch of minimum training loss with its
95% confidence interval over the seeds, next to the paper's numbers. Only
complete rows are drawn (every model with as many seeds as the fullest cell
of the CSV), so a table still being filled gives a figure of its done rows.

    python docs/source/_scripts/plot_table2.py \
        docs/source/_data/neighbor_dependent/paper/table2.csv \
        docs/source/_static/table2_paper.png
"""

import os
import sys

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(
    0, os.path.join(os.path.dirname(__file__), '..', '..', '..', 'examples')
)
from neighbor_dependent import PAPER  # noqa: E402
from synthetic_common import MODELS, mean_ci95, read_csv  # noqa: E402

if len(sys.argv) != 3:
    sys.exit(__doc__)
csv_path, out_path = sys.argv[1:]
results = read_csv(csv_path)
cells = {}
for r in results:
    cells.setdefault((int(r.dataset[1:]), r.num_layers, r.model), []).append(
        100 * r.test_acc_at_min_loss
    )
seeds = max((len(v) for v in cells.values()), default=0)
rows = sorted(
    {
        (k, num_layers)
        for k, num_layers, _ in cells
        if all(len(cells.get((k, num_layers, m), [])) == seeds for m in MODELS)
    }
)
if not rows:
    sys.exit(f"'{csv_path}' holds no complete row")

fig, axes = plt.subplots(
    1,
    len(rows),
    figsize=(2.2 * len(rows) + 1, 3.2),
    sharey=True,
    squeeze=False,
)
for ax, (k, num_layers) in zip(axes[0], rows):
    for i, model in enumerate(MODELS):
        paper = tuple(map(float, PAPER[(k, num_layers)][i].split(' ± ')))
        points = (
            (-0.12, mean_ci95(cells[(k, num_layers, model)]), 'o', 'ours'),
            (0.12, paper, 's', 'paper'),
        )
        for color, (shift, (mean, half), fmt, label) in enumerate(points):
            ax.errorbar(
                i + shift,
                mean,
                yerr=half,
                fmt=fmt,
                color=f'C{color}',
                capsize=3,
                label=label if i == 0 else None,
            )
    ax.set_title(f'k={k}, L={num_layers}')
    ax.set_xticks(range(len(MODELS)))
    ax.set_xticklabels(MODELS, rotation=45)
    ax.grid(axis='y', alpha=0.3)
axes[0, 0].set_ylabel('test accuracy (%)')
axes[0, -1].legend(loc='best')  # where it hides no point
fig.suptitle(
    f'Neighbour-dependent task (Table 2): mean ± 95% CI, {seeds} seeds'
)
fig.tight_layout()
fig.savefig(out_path, dpi=120)
print(f'wrote {out_path} ({len(rows)} rows)')
