r"""The run store: one JSON file per finished run.

A run is named by its configuration (a flat dict of JSON values), taken in
its JSON form (:func:`canonical`: a tuple is a list, key order does not
count): the file ``<slug>_<hash>.json`` in the study's folder, ``slug`` a
readable form of the values in the order of the sorted keys and ``hash``
the first 12 hex digits of the SHA-1 of the whole configuration (sorted
keys). The file is written to a temporary name in
the same folder and moved into place with :func:`os.replace`, so a run file
is there whole or not at all: a finished run is a file that exists and
parses. Two writers of the same run leave one whole file (the last);
writers of different runs never touch each other's files.

A run file holds::

    {"config": {...}, "status": "finished" | "diverged",
     "result": {...}, "message": "...", "provenance": {...}}

``result`` holds the run's measurements (``null`` for a number that is not
one: NaN, or not recorded); a diverged run has ``"result": {}`` and the
reason in ``message``. ``provenance`` says what made the run
(:mod:`gate_paper.provenance`): ``{"recorded": true, "commit": ...}``, or,
for a file written before run files recorded it, ``{"recorded": false,
"note": ...}``.

Files are written with the permissions of any file this process creates
(``0666`` less the umask), as the tables are, so that a group-shared
folder stays readable. Reading validates: a file that is not a whole run
record (a cut write, another version's file, a folder named ``*.json``, a
file that cannot be read) counts as not finished, with a warning naming
it and why.
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

# The permissions of a new file of this process (mkstemp's are 0600).
_UMASK = os.umask(0o022)
os.umask(_UMASK)
_MODE = 0o666 & ~_UMASK


def canonical(config: dict) -> dict:
    r"""``config`` as a run file gives it back: its JSON form (a tuple is
    a list), keys sorted. A :class:`ValueError` or :class:`TypeError` if it
    is not a dict of JSON values (a NaN, an object)."""
    if not isinstance(config, dict):
        raise TypeError(
            f'a run configuration is a dict, got {type(config).__name__}'
        )
    return json.loads(json.dumps(config, sort_keys=True, allow_nan=False))


def run_id(config: dict) -> str:
    r"""The file stem of the run ``config``: a readable slug of its values
    (at most 80 characters, in the order of the sorted keys) and a hash of
    the whole configuration; neither depends on the order of the keys or
    on a tuple against a list."""
    config = canonical(config)
    text = json.dumps(config, sort_keys=True, allow_nan=False)
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    slug = '_'.join(
        ' '.join(map(str, v)) if isinstance(v, list) else str(v)
        for v in config.values()
    )
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
    provenance: Optional[dict] = None,
) -> str:
    r"""Writes the run file of ``config`` atomically and returns its path.
    Non-finite numbers in ``result`` are written as ``null``."""
    if status not in STATUSES:
        raise ValueError(f'status must be one of {STATUSES}, got {status!r}')
    if status == 'finished' and not result:
        raise ValueError('a finished run needs a result (got none)')
    record = {
        'config': canonical(config),
        'status': status,
        'result': _plain(result),
    }
    if message is not None:
        record['message'] = message
    if provenance is not None:
        record['provenance'] = _plain(provenance)
    text = json.dumps(record, indent=1, allow_nan=False)
    path = path_of(folder, config)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix='.run-', suffix='.tmp')
    try:
        os.fchmod(fd, _MODE)
        with os.fdopen(fd, 'w') as f:
            f.write(text + '\n')
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def read(path: str, fields: Iterable[str] = ()) -> dict:
    r"""The record of the run file ``path``; a :class:`ValueError` naming
    the file and why if it cannot be read (a folder, no permission), does
    not parse (a cut write, nesting too deep) or is not a run record: a
    ``'finished'`` run needs a non-empty ``result`` holding every key of
    ``fields`` (the study's measurements: another version's file may lack
    them), a ``'diverged'`` one a ``message``. A UTF-8 byte order mark (an
    editor's re-save) is accepted."""
    try:
        with open(path, encoding='utf-8-sig') as f:
            record = json.load(f)
    except OSError as e:  # a folder named *.json, no permission
        raise ValueError(
            f"'{path}' cannot be read ({e.strerror or e})"
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        why = 'nested too deep' if isinstance(e, RecursionError) else e
        raise ValueError(f"'{path}' is not a whole run file ({why})") from None
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
    if record['status'] == 'finished':
        missing = [k for k in fields if k not in record['result']]
        if not record['result'] or missing:
            raise ValueError(
                f"'{path}' is a finished run without "
                + (
                    f'the results {", ".join(missing)}'
                    if record['result']
                    else 'a result'
                )
                + " (another version's file?)"
            )
    elif not isinstance(record.get('message'), str):
        raise ValueError(
            f"'{path}' is a diverged run without a 'message' saying why"
        )
    return record


def scan(
    folder: str, fields: Iterable[str] = ()
) -> Tuple[Dict[str, dict], List[str]]:
    r"""The run files of ``folder``: ``({stem: record}, unreadable)``, the
    latter the paths of the ``*.json`` entries that :func:`read` refuses
    (a cut write, a foreign file, a folder), each with a warning naming
    it. ``fields``: as :func:`read`."""
    records, bad = {}, []
    fields = tuple(fields)
    if not os.path.isdir(folder):
        return records, bad
    try:
        names = sorted(os.listdir(folder))
    except OSError as e:
        raise ValueError(
            f"the run folder '{folder}' cannot be listed ({e.strerror or e})"
        ) from None
    for name in names:
        if not name.endswith('.json') or name.startswith('.'):
            continue
        path = os.path.join(folder, name)
        try:
            records[name[: -len('.json')]] = read(path, fields)
        except ValueError as e:
            warnings.warn(f'{e}; its run counts as not finished')
            bad.append(path)
    return records, bad


def load(
    folder: str,
    configs: Optional[Iterable[dict]] = None,
    fields: Iterable[str] = (),
) -> List[dict]:
    r"""The records of the finished runs in ``folder`` (of ``configs`` only,
    in their order, if given). ``fields``: as :func:`read`."""
    records, _ = scan(folder, fields)
    if configs is None:
        return list(records.values())
    return pick(records, configs)


def pick(records: Dict[str, dict], configs: Iterable[dict]) -> List[dict]:
    r"""The records of :func:`scan` that are runs of ``configs``, in their
    order."""
    found = []
    for config in configs:
        record = records.get(run_id(config))
        if record is not None and record['config'] == canonical(config):
            found.append(record)
    return found
