r"""Tables from run files (:mod:`gate_paper.store`) with pandas: the runs
as one :class:`pandas.DataFrame`, and the writer of a study's tables
(markdown for reading, one CSV per table for the docs)."""

import os
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

# pandas loads in runs_frame: a script's argument parsing does not wait.
if TYPE_CHECKING:
    import pandas as pd


def runs_frame(
    records: Sequence[dict], results: Sequence[str] = ()
) -> 'pd.DataFrame':
    r"""One row per run: its configuration's columns, ``status``
    (``'finished'`` or ``'diverged'``) and its results' columns, at least
    ``results`` (``null`` and the results of a diverged run are NaN)."""
    import pandas as pd

    rows = [
        {**r['config'], 'status': r['status'], **r['result']} for r in records
    ]
    frame = pd.DataFrame(rows)
    for name in results:
        if name not in frame.columns:
            frame[name] = float('nan')
    return frame.fillna(float('nan')).infer_objects()


def markdown(frame: 'pd.DataFrame') -> str:
    r"""``frame`` as a markdown table (cells as they are)."""
    header = [str(c) for c in frame.columns]
    lines = [
        '| ' + ' | '.join(header) + ' |',
        '| ' + ' | '.join('---' for _ in header) + ' |',
    ]
    for row in frame.itertuples(index=False):
        lines.append('| ' + ' | '.join(str(v) for v in row) + ' |')
    return '\n'.join(lines) + '\n'


def write_tables(
    folder: str,
    stem: str,
    title: str,
    intro: str,
    tables: List[Tuple[str, Optional[str], 'pd.DataFrame']],
) -> str:
    r"""Writes ``<stem>.md`` (the title, the ``intro`` and every table) and,
    per table ``(name, heading, frame)``, ``<stem>_<name>.csv``, which the
    documentation includes. Returns the markdown."""
    os.makedirs(folder, exist_ok=True)
    parts = [f'# {title}\n\n{intro}\n']
    for name, heading, frame in tables:
        if heading:
            parts.append(f'## {heading}\n')
        parts.append(markdown(frame))
        frame.to_csv(os.path.join(folder, f'{stem}_{name}.csv'), index=False)
    text = '\n'.join(parts)
    with open(os.path.join(folder, f'{stem}.md'), 'w') as f:
        f.write(text)
    return text
