r"""What a patience of 100 epochs instead of 300 would change on the
recorded real-graph runs (``examples/real_graphs.py`` selects the epoch of
best validation metric and stops after ``patience`` epochs without
improvement).

A run whose best epoch ``b`` (1-based) is at most ``patience + 1`` is
provably unchanged under the smaller patience: before epoch ``b`` no gap
between improvements can reach ``patience`` epochs, so the shorter run
still reaches ``b``, and it ends at ``b + patience`` at the latest. For the
others the shorter run stops at ``b + patience`` or earlier. So the epochs
it needs are at most ``min(b + patience, epochs_run)`` per run, and the
ratio printed is a lower bound of the saving::

    python docs/source/_scripts/patience_evidence.py \
        docs/source/_data/real_graphs/small_paper_results.csv
"""

import argparse
import csv

parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
parser.add_argument('results', help="a 'results.csv' of real_graphs.py")
parser.add_argument('--patience', type=int, default=100)
args = parser.parse_args()

with open(args.results, newline='') as f:
    runs = list(csv.DictReader(f))
best = [int(r['best_epoch']) for r in runs]
run = [int(r['epochs_run']) for r in runs]
recorded = {int(r['patience']) for r in runs}
unchanged = sum(b <= args.patience + 1 for b in best)
needed = sum(min(b + args.patience, e) for b, e in zip(best, run, strict=True))
print(
    f'{len(runs)} runs (recorded with patience {sorted(recorded)}); with '
    f'patience {args.patience}: {unchanged} ({100 * unchanged / len(runs):.1f}'
    f'%) provably unchanged (best epoch <= {args.patience + 1}); epochs '
    f'{sum(run)} recorded, at most {needed} needed: '
    f'{sum(run) / needed:.2f}x fewer'
)
