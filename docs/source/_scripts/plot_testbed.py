"""Draws ``docs/source/_static/testbed.png``: the neighbor-dependent test bed
for k = 1, 2, 3 (paper Fig. "randSynData").

For each k, the left panel shows the nodes' own 2-d input features and the
right panel the output of the random k-layer GAT that made the labels
(:meth:`RandomGATLabels.embed`), both coloured by label. The labels are
K-means clusters of the right panel, hence separable there and mixed on the
left.

Run from the repository root::

    python docs/source/_scripts/plot_testbed.py
"""

import os.path as osp
import tempfile

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402

from torch_geometric_gate.datasets import NeighborDependentER  # noqa: E402

OUT = osp.join(osp.dirname(__file__), '..', '_static', 'testbed.png')


def main() -> None:
    root = tempfile.mkdtemp()
    fig, axes = plt.subplots(2, 3, figsize=(9, 6), constrained_layout=True)
    colors = ['tab:blue', 'tab:orange']
    for col, k in enumerate((1, 2, 3)):
        dataset = NeighborDependentER(root, num_layers=k, seed=0)
        data = dataset[0]
        h = dataset.label_transform.embed(data.x, data.edge_index)
        panels = (
            (axes[0, col], data.x, 'own features $\\mathbf{h}^0_v$'),
            (
                axes[1, col],
                h,
                f'random GAT output $\\mathbf{{h}}^{{M_{k}}}_v$',
            ),
        )
        for ax, z, title in panels:
            for c in (0, 1):
                m = data.y == c
                ax.scatter(
                    z[m, 0],
                    z[m, 1],
                    s=4,
                    c=colors[c],
                    label=f'class {c}',
                    rasterized=True,
                )
            ax.set_title(f'k = {k}: {title}', fontsize=10)
            ax.tick_params(labelsize=7)
    axes[0, 0].legend(fontsize=8, markerscale=3, loc='upper left')
    fig.suptitle(
        'NeighborDependentER (N = 1000, p = 0.01, d = 2, seed 0): '
        'labels by colour',
        fontsize=11,
    )
    fig.savefig(OUT, dpi=90)
    print(f'wrote {osp.abspath(OUT)}')


if __name__ == '__main__':
    main()
