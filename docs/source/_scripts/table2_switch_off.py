r"""How many layers the GATE and GATE_S runs of one Table 2 row switch off,
and the test accuracy they reach.

For every GATE and GATE_S run of the row (k, L) in the given results CSVs
(``examples/neighbor_dependent.py`` writes them), sums the final mean
alpha_vv over the layers: roughly the number of layers switched off
(alpha_vv = 1: the layer passes a node's own features on; 0: it
aggregates the neighbours only). Prints each run, then groups the runs by
that sum rounded to a whole number of layers, with the range of the sum
and of the test accuracy at the epoch of minimum training loss:

    python docs/source/_scripts/table2_switch_off.py 3 4 \
        docs/source/_data/neighbor_dependent/paper/table2.csv \
        docs/source/_data/neighbor_dependent/ours/table2.csv
"""

import os
import sys

sys.path.insert(
    0, os.path.join(os.path.dirname(__file__), '..', '..', '..', 'examples')
)
from synthetic_common import read_csv  # noqa: E402


def main(k: int, num_layers: int, csv_paths) -> None:
    runs = [
        r
        for path in csv_paths
        for r in read_csv(path)
        if r.dataset == f'k{k}'
        and r.num_layers == num_layers
        and r.model in ('GATE', 'GATE_S')
    ]
    if not runs:
        sys.exit(f'no GATE or GATE_S runs of k={k}, L={num_layers}')
    runs.sort(key=lambda r: sum(r.final_alpha_vv_mean))
    groups = {}
    for r in runs:
        total = sum(r.final_alpha_vv_mean)
        layers = ' '.join(f'{a:.2f}' for a in r.final_alpha_vv_mean)
        print(
            f'{r.source:8} {r.model:6} seed {r.seed}: alpha_vv {layers}, '
            f'sum {total:.2f}, test {100 * r.test_acc_at_min_loss:.1f}%, '
            f'train {100 * r.train_acc_at_min_loss:.1f}%'
        )
        groups.setdefault(round(total), []).append(r)
    for off, group in sorted(groups.items()):
        sums = [sum(r.final_alpha_vv_mean) for r in group]
        accs = [100 * r.test_acc_at_min_loss for r in group]
        print(
            f'about {off} layer(s) off: {len(group)} runs, sum '
            f'{min(sums):.2f}-{max(sums):.2f}, test '
            f'{min(accs):.1f}-{max(accs):.1f}%'
        )


if __name__ == '__main__':
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
