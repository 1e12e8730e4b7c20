r"""The runs of a GPU run queue's call into the run store
(:func:`unpack`, every file validated before any is written) and the docs'
tables of the queue's studies rebuilt from the store
(:func:`rebuild_tables`)."""

import collections
import os
import tarfile
import tempfile
import warnings

from gate_paper import store
from gate_paper.queue_plan import (
    STORE,
    STUDIES,
    TABLES,
    configs,
    dry_options,
    plan,
)


def _records(path, dry_epochs):
    r"""The validated ``(study, record)`` of every run file of the tar file
    ``path`` (:func:`unpack`)."""
    from gate_paper.real_graphs import RESULTS

    planned = {store.run_id(c): s for _, s, c in plan(dry_epochs)}
    valid = []
    with tarfile.open(path) as tar, tempfile.TemporaryDirectory() as tmp:
        for member in tar.getmembers():
            study, _, name = member.name.partition('/')
            if (
                not member.isfile()
                or study not in STUDIES
                or '/' in name
                or not name.endswith('.json')
            ):
                raise ValueError(
                    f'{path}: {member.name!r} is not <study>/<run>.json of '
                    f'the studies {sorted(STUDIES)}'
                )
            copy = os.path.join(tmp, name)
            with open(copy, 'wb') as f:
                f.write(tar.extractfile(member).read())
            try:
                record = store.read(copy, RESULTS)
            except ValueError as e:  # it names the copy: name the member
                why = str(e).replace(f"'{copy}'", member.name)
                raise ValueError(f'{path}: {why}') from None
            key = store.run_id(record['config'])
            if key + '.json' != name:
                raise ValueError(
                    f'{path}: {member.name} is not named by its run'
                )
            facts = record.get('provenance') or {}
            if not (facts.get('recorded') and facts.get('commit')):
                raise ValueError(
                    f'{path}: {member.name} records no provenance or no '
                    'commit (commit, versions, device), as every run of the '
                    'queue does (run it with --commit where there is no .git)'
                )
            if planned.get(key) != study:
                raise ValueError(
                    f"{path}: {member.name} is not a run of the queue's "
                    f'{study}' + ('' if dry_epochs else ' (a --dry run?)')
                )
            valid.append((study, record))
        # A tar file ends with a zero block; one that ends at a member's
        # end (a cut transfer) or at a damaged header would read as whole.
        tar.fileobj.seek(tar.offset)
        if (
            tar.fileobj.read(tarfile.BLOCKSIZE)
            != tarfile.NUL * tarfile.BLOCKSIZE
        ):
            raise ValueError(
                f'{path}: not a whole tar file: it ends (or is damaged) '
                f'after {len(valid)} run files, without the end-of-archive '
                'block (a cut transfer? fetch runs.tar again)'
            )
    return valid


def unpack(path, store_root=STORE, dry_epochs=None):
    r"""Writes the run files of ``path`` (a ``runs.tar`` of :func:`run`)
    into the store, each validated (a whole run record of a run of the
    queue's :func:`plan`, with ``dry_epochs`` that of ``--dry``, named by
    its configuration); returns ``{study: count}``. Nothing is written
    unless every file is valid. A run the store already holds (a whole run
    file: one a call ran again from a store without it) is kept as it is,
    with a warning naming it; delete its file to take the new one."""
    from gate_paper.real_graphs import RESULTS

    try:
        valid = _records(path, dry_epochs)
    except tarfile.TarError as e:  # a cut or damaged file
        why = str(e).splitlines()[-1].removeprefix('- method tar: ')
        raise ValueError(
            f'{path}: not a whole tar file ({why}; a cut transfer? fetch '
            'runs.tar again)'
        ) from None
    counts, kept = collections.Counter(), []
    for study, record in valid:
        folder = os.path.join(store_root, study)
        there = store.path_of(folder, record['config'])
        if os.path.exists(there):
            try:
                store.read(there, RESULTS)
                kept.append(there)
                continue
            except ValueError:  # not a whole run file: replaced
                pass
        os.makedirs(folder, exist_ok=True)
        store.save(
            folder,
            record['config'],
            record['result'],
            record['status'],
            record.get('message'),
            record.get('provenance'),
        )
        counts[study] += 1
    if kept:
        warnings.warn(
            f'{len(kept)} runs of {path} are in the store already and were '
            f'kept, not replaced: {", ".join(kept[:3])}'
            + (', ...' if len(kept) > 3 else '')
        )
    return dict(counts)


def rebuild_tables(store_root=STORE, tables_root=TABLES, dry_epochs=None):
    r"""The docs' tables of the queue's studies from the store: each
    study's :mod:`gate_paper.real_graphs` tables (once it has runs) and the
    strong recipe's GAT-sep against GATE-sep per depth
    (:func:`gate_paper.real_graphs_tables.strong_sep`, "no runs yet" until
    runs arrive). With ``dry_epochs``, the tables of the runs of ``run
    --dry --dry-epochs N`` (:func:`plan`)."""
    from gate_paper import real_graphs
    from gate_paper.real_graphs_tables import strong_sep
    from gate_paper.tables import write_tables

    for study, (argv, sub) in STUDIES.items():
        argv = argv + dry_options(argv, dry_epochs)  # (as plan's)
        folder = os.path.join(store_root, study)
        records = store.load(folder, configs(argv), real_graphs.RESULTS)
        if records:
            real_graphs.main(
                argv
                + ['--tables-only', '--out-dir', folder]
                + ['--tables-dir', os.path.join(tables_root, sub)]
            )
        if study == 'real_graphs_strong':
            write_tables(
                os.path.join(tables_root, sub),
                'strong',
                'The strong recipe: GAT-sep against GATE-sep per depth',
                f'{len(records)} runs of the strong recipe.\n',
                [('sep', None, strong_sep(records))],
            )
