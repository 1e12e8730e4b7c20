r"""The GPU run queue's order (:func:`plan`: the real-graph runs that need
a GPU, tier by tier, as issue 49 orders them), what of it the run store
holds (:func:`done_in`, :func:`show_plan`) and the seconds per epoch the
finished runs measured (:func:`measured`). :mod:`gate_paper.run_queue`
runs the calls; :mod:`gate_paper.queue_results` takes their runs into the
store."""

import collections
import os
import statistics
import tempfile

from gate_paper import store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STORE = os.path.join(ROOT, 'gate_paper', 'runs')
TABLES = os.path.join(ROOT, 'docs', 'source', '_data', 'real_graphs')
# (tier, study, real_graphs options, the models in the order of a split)
TIERS = [
    (1, 'real_graphs_tolokers', ['--datasets', 'Tolokers'], ['GATE', 'GAT']),
    (
        2,
        'real_graphs_tolokers',
        ['--datasets', 'Tolokers'],
        ['MLP+GAT', 'MLP', 'FAGCN'],
    ),
    (
        3,
        'real_graphs_strong',
        ['--datasets', 'Minesweeper', 'Tolokers', '--recipes', 'strong'],
        ['GAT-sep', 'GATE-sep'],
    ),
    (
        4,
        'real_graphs_strong',
        ['--datasets', 'Minesweeper', 'Tolokers', '--recipes', 'strong'],
        ['GAT', 'GATv2', 'GATE'],
    ),
]
# The options of every study for the tables: the models of both tiers.
STUDIES = {
    'real_graphs_tolokers': (
        ['--datasets', 'Tolokers', '--models']
        + ['MLP', 'GAT', 'MLP+GAT', 'FAGCN', 'GATE'],
        'tolokers',
    ),
    'real_graphs_strong': (
        ['--datasets', 'Minesweeper', 'Tolokers', '--recipes', 'strong']
        + ['--models', 'GAT', 'GAT-sep', 'GATv2', 'GATE', 'GATE-sep'],
        'strong',
    ),
}
DRY = ['--max-epochs', '{epochs}', '--hidden', '8']


def dry_options(argv, dry_epochs):
    r"""The options that make a study's runs (of options ``argv``) the
    tiny runs of ``run --dry --dry-epochs dry_epochs``; none without
    ``dry_epochs``."""
    if dry_epochs is None:
        return []
    extra = [a.format(epochs=dry_epochs) for a in DRY]
    return extra + (['--heads', '2'] if 'strong' in argv else [])


def configs(argv):
    r"""The configurations :mod:`gate_paper.real_graphs` makes for the
    options ``argv``."""
    from gate_paper import real_graphs

    with tempfile.TemporaryDirectory() as tmp:
        args = real_graphs.parse_args(
            argv + ['--tables-only', '--out-dir', tmp]
        )
    return real_graphs.configs(args)


def plan(dry_epochs=None):
    r"""Every run of the queue in its order: ``[(tier, study, config)]``.
    With ``dry_epochs``, the tiny runs of ``--dry``."""
    order = []
    for tier, study, argv, models in TIERS:
        extra = ['--models', *models, *dry_options(argv, dry_epochs)]
        found = configs(argv + extra)
        rank = {m: i for i, m in enumerate(models)}
        found.sort(
            key=lambda c: (
                c['dataset'] != argv[1],  # the first dataset first
                c['num_layers'],
                c['split'],
                rank[c['model']],
            )
        )
        order += [(tier, study, c) for c in found]
    return order


def done_in(folder_of, order):
    r"""The run ids of ``order`` finished in the folders ``folder_of(study)``
    (a file that the store refuses counts as not finished)."""
    from gate_paper.real_graphs import RESULTS

    done = set()
    for study in {s for _, s, _ in order}:
        for folder in folder_of(study):
            records, _ = store.scan(folder, RESULTS)
            done |= {store.run_id(r['config']) for r in records.values()}
    return done


def measured(records, procs=None):
    r"""Per model and depth (``'<dataset> <recipe> <model> L=<L>'``): the
    runs, the mean seconds per epoch, epochs run and wall seconds of the
    finished runs ``records``."""
    groups = collections.defaultdict(list)
    for r in records:
        if r['status'] != 'finished':
            continue
        c = r['config']
        key = f'{c["dataset"]} {c["recipe"]} {c["model"]} L={c["num_layers"]}'
        groups[key].append(r)
    out = {}
    for key, rs in groups.items():
        res = [r['result'] for r in rs]
        out[key] = {
            'runs': len(rs),
            's_per_epoch': statistics.mean(x['s_per_epoch'] for x in res),
            'epochs_run': statistics.mean(x['epochs_run'] for x in res),
            'wall_s': statistics.mean(x['wall_s'] for x in res),
            'procs': procs,
        }
    return out


def _cell(c):
    return (c['dataset'], c['recipe'], c['model'], c['num_layers'])


def show_plan(store_root=STORE, procs=8):
    r"""Per tier: the runs finished in the store, the next ones, and the
    time the rest takes by the wall times the store's GPU runs measured
    (per dataset, recipe, model and depth; with ``procs`` processes
    sharing the GPU as they did)."""
    from gate_paper.real_graphs import RESULTS

    order = plan()
    done = done_in(lambda s: [os.path.join(store_root, s)], order)
    walls = collections.defaultdict(list)
    for study in {s for _, s, _ in order}:
        records, _ = store.scan(os.path.join(store_root, study), RESULTS)
        for r in records.values():
            p = r.get('provenance', {})
            if p.get('recorded') and str(p.get('device', '')).startswith(
                'cuda'
            ):
                walls[_cell(r['config'])].append(p['wall_s'])
    for tier in sorted({t for t, _, _ in order}):
        runs = [c for t, _, c in order if t == tier]
        left = [c for c in runs if store.run_id(c) not in done]
        known = [
            statistics.mean(walls[_cell(c)]) for c in left if walls[_cell(c)]
        ]
        line = f'tier {tier}: {len(runs) - len(left)} of {len(runs)} finished'
        if known:
            line += (
                f'; {len(known)} of the {len(left)} left have measured cells:'
                f' about {sum(known) / procs / 60:.0f} min with {procs} '
                'processes'
            )
        print(line)
        for c in left[:3]:
            print(f'    next: {store.run_id(c)}')
