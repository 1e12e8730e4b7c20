r"""The run store: one JSON file per finished run.

A run is named by its configuration (a flat dict of JSON scalars): the file
``<slug>_<hash>.json`` in the study's folder, ``slug`` a readable form of
the values and ``hash`` the first 12 hex digits of the SHA-1 of the whole
configuration (sorted keys). The file is written to a temporary name in
the same folder and moved into place with :func:`os.replace`, so a run file
is there whole or not at all: a finished run is a file that exists and
parses. Two writers of the same run leave one whole file (the last);
writers of different runs never touch each other's files.

A run file holds::

    {"config": {...}, "status": "finished" | "diverged",
     "result": {...}, "message": "..."}

``result`` holds the run's measurements (``null`` for a number that is not
one: NaN, or not recorded); a diverged run has ``"result": {}`` and the
reason in ``message``.
"""

import hashlib
import json
import math
import os
import re
import tempfile
import warnings
from typing import Dict, Iterable, List, Optional, Tuple

STATUSES = ('finished', 'diverged')


def run_id(config: dict) -> str:
    r"""The file stem of the run ``config``: a readable slug of its values
    (at most 80 characters) and a hash of the whole configuration."""
    text = json.dumps(config, sort_keys=True, allow_nan=False)
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    slug = '_'.join(str(v) for v in config.values())
    slug = re.sub(r'[^A-Za-z0-9._+=-]+', '-', slug).strip('-_')[:80]
    return f'{slug}_{digest}'


def path_of(folder: str, config: dict) -> str:
    return os.path.join(folder, run_id(config) + '.json')


def _plain(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def save(
    folder: str,
    config: dict,
    result: dict,
    status: str = 'finished',
    message: Optional[str] = None,
) -> str:
    r"""Writes the run file of ``config`` atomically and returns its path.
    Non-finite numbers in ``result`` are written as ``null``."""
    if status not in STATUSES:
        raise ValueError(f'status must be one of {STATUSES}, got {status!r}')
    record = {'config': config, 'status': status, 'result': _plain(result)}
    if message is not None:
        record['message'] = message
    text = json.dumps(record, indent=1, allow_nan=False)
    path = path_of(folder, config)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix='.run-', suffix='.tmp')
    try:
        with os.fdopen(fd, 'w') as f:
            f.write(text + '\n')
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def read(path: str) -> dict:
    r"""The record of the run file ``path``; a :class:`ValueError` naming
    the file if it does not parse or is not a run record. A UTF-8 byte
    order mark (an editor's re-save) is accepted."""
    try:
        with open(path, encoding='utf-8-sig') as f:
            record = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"'{path}' is not a whole run file ({e})") from None
    if (
        not isinstance(record, dict)
        or not isinstance(record.get('config'), dict)
        or not isinstance(record.get('result'), dict)
        or record.get('status') not in STATUSES
    ):
        raise ValueError(
            f"'{path}' is not a run file: expected a JSON object with "
            "'config' and 'result' objects and 'status' in "
            f'{STATUSES}'
        )
    return record


def scan(folder: str) -> Tuple[Dict[str, dict], List[str]]:
    r"""The run files of ``folder``: ``({stem: record}, unreadable)``, the
    latter the paths of the files that do not parse (a cut write or a
    foreign file), each with a warning naming it."""
    records, bad = {}, []
    if not os.path.isdir(folder):
        return records, bad
    for name in sorted(os.listdir(folder)):
        if not name.endswith('.json') or name.startswith('.'):
            continue
        path = os.path.join(folder, name)
        try:
            records[name[: -len('.json')]] = read(path)
        except ValueError as e:
            warnings.warn(f'{e}; its run counts as not finished')
            bad.append(path)
    return records, bad


def load(folder: str, configs: Optional[Iterable[dict]] = None) -> List[dict]:
    r"""The records of the finished runs in ``folder`` (of ``configs`` only,
    in their order, if given)."""
    records, _ = scan(folder)
    if configs is None:
        return list(records.values())
    found = []
    for config in configs:
        record = records.get(run_id(config))
        if record is not None and record['config'] == config:
            found.append(record)
    return found
