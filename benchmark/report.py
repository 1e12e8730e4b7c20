r"""What every benchmark writes: the result files (a CSV and a markdown
table, each replaced whole), the lines above a table (the command that
wrote it, the commit, the machine, the script's description) and the
checked output folder; and the index of the committed results.

The scripts import it as :obj:`report`, beside :obj:`common`; it imports
torch and PyG only where it describes the machine, so that a script's
``--help`` does not wait for them. Run as a
script, it writes the index of ``benchmark/results/`` into that folder's
``README.md`` (``--check``: exit 1 if the committed index is not the one
the files give)::

    python benchmark/report.py
"""

import argparse
import csv
import datetime
import importlib.metadata
import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from typing import List, Optional, Sequence


def describe(doc: str, paragraph: int = 1) -> str:
    r"""A paragraph of a script's docstring as one markdown line."""
    text = doc.split('\n\n')[paragraph].replace('\n', ' ').rstrip(':')
    return re.sub(r':\w+:`~?([^`]*)`', r'`\1`', text)


def command_line(script: str, argv: Optional[Sequence[str]] = None) -> str:
    r"""The command that produced a result file, as the user typed it."""
    args = list(argv) if argv is not None else sys.argv[1:]
    return shlex.join(['python', f'benchmark/{script}', *args])


HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, 'results')


def commit() -> str:
    r"""The checkout's commit (:obj:`git rev-parse --short HEAD`), with
    ``+changes`` when tracked files differ from it, or ``unknown`` outside
    a git checkout."""
    try:
        git = ['git', '-C', HERE]
        head = subprocess.run(
            [*git, 'rev-parse', '--short', 'HEAD'],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout.strip()  # fmt: skip
        changed = subprocess.run(
            [*git, 'status', '--porcelain', '--untracked-files=no'],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return 'unknown'
    return f'{head}+changes' if changed else head


def machine_info() -> List[str]:
    r"""Markdown list lines: commit, date, CPU, GPU, versions,
    torch-scatter."""
    import torch

    try:  # Its version without importing it (seconds: torch._dynamo):
        pyg = importlib.metadata.version('torch_geometric')
    except importlib.metadata.PackageNotFoundError:
        import torch_geometric

        pyg = torch_geometric.__version__
    try:
        import torch_scatter

        scatter = f'present ({torch_scatter.__version__})'
    except ImportError:
        scatter = 'absent'
    cpu = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo') as f:
            cpu = next(
                (line.split(':', 1)[1].strip() for line in f
                 if line.startswith('model name')),
                cpu,
            )  # fmt: skip
    except OSError:
        pass
    gpu = (
        torch.cuda.get_device_name(0)
        if torch.cuda.is_available()
        else 'none (GPU numbers not measured)'
    )
    return [
        f'- commit: {commit()}',
        f'- date: {datetime.date.today().isoformat()}',
        f'- CPU: {cpu}, {os.cpu_count()} cores visible, torch threads '
        f'{torch.get_num_threads()}',
        f'- GPU: {gpu}',
        f'- Python {platform.python_version()}, torch {torch.__version__}, '
        f'torch_geometric {pyg}',
        f'- torch-scatter: {scatter}, triton: {_triton_version()}',
    ]


def _triton_version() -> str:
    try:
        import triton
    except ImportError:
        return 'absent'
    return triton.__version__


def result_notes(
    script: str, argv: Optional[Sequence[str]], doc: Optional[str] = None
) -> List[str]:
    r"""The lines above a result table: the command that wrote it, the
    machine (:func:`machine_info`) and, given the script's docstring
    :obj:`doc`, its description (:func:`describe`)."""
    lines = [f'Command: `{command_line(script, argv)}`', '', *machine_info()]
    return lines if doc is None else [*lines, '', describe(doc)]


def build_info() -> List[str]:
    r"""What building a CUDA extension (such as :obj:`turbo-gnn`) from
    source needs here: torch's CUDA version, :obj:`nvcc`, the toolkit's
    path and the host compiler, as markdown list lines."""

    def version(cmd, line=-1):
        try:
            out = subprocess.run(
                cmd, capture_output=True, text=True, timeout=20
            ).stdout
            return out.strip().splitlines()[line] if out.strip() else 'none'
        except (OSError, subprocess.SubprocessError) as err:
            return f'not found ({type(err).__name__})'

    import torch
    from torch.utils.cpp_extension import CUDA_HOME

    return [
        f'- torch.version.cuda: {torch.version.cuda}',
        f'- CUDA toolkit (torch.utils.cpp_extension.CUDA_HOME): {CUDA_HOME}',
        f'- nvcc: {version(["nvcc", "--version"])}',
        f'- gcc: {version(["gcc", "--version"], 0)}',
        f'- g++: {shutil.which("g++")}, ninja: {shutil.which("ninja")}',
    ]


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return '-'
    if isinstance(value, float):
        return f'{value:.3g}' if abs(value) < 100 else f'{value:.0f}'
    return str(value)


def write_results(
    rows: List[dict],
    stem: str,
    columns: Sequence[str],
    title: str,
    notes: Sequence[str] = (),
):
    r"""Writes :obj:`<stem>.csv` (every column) and :obj:`<stem>.md` (the
    title, :obj:`notes` lines and a table of the columns that hold a
    value), each to a temporary name moved into place, so that a reader
    (or a kill) sees the previous complete file or the new one. Call it
    after every configuration."""
    folder = os.path.dirname(os.path.abspath(stem))
    os.makedirs(folder, exist_ok=True)
    shown = [
        c for c in columns if any(r.get(c) not in (None, '') for r in rows)
    ]
    lines = [f'# {title}', '', *notes, '']
    lines += ['| ' + ' | '.join(shown) + ' |', '|' + ' --- |' * len(shown)]
    lines += ['| ' + ' | '.join(_cell(r.get(c)) for c in shown) + ' |'
              for r in rows]  # fmt: skip
    tmp = f'{stem}.csv.tmp'
    with open(tmp, 'w', newline='') as f:
        writer = csv.DictWriter(f, columns, extrasaction='ignore')
        writer.writeheader()
        for r in rows:
            writer.writerow({
                k: round(v, 6) if isinstance(v, float) else v
                for k, v in r.items()
            })  # fmt: skip
    os.replace(tmp, f'{stem}.csv')
    with open(f'{stem}.md.tmp', 'w') as f:
        f.write('\n'.join(lines) + '\n')
    os.replace(f'{stem}.md.tmp', f'{stem}.md')


def output_folder(parser, path: str, flag: str = '--out') -> str:
    r"""Creates the folder :obj:`path` of :obj:`flag` if needed and returns
    it; a usage error (:meth:`parser.error`) when it names a file or a
    folder that cannot be created or written to."""
    if os.path.exists(path) and not os.path.isdir(path):
        parser.error(
            f'argument {flag}: expected a folder, got the file {path!r}'
        )
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        parser.error(
            f'argument {flag}: cannot create the folder {path!r} '
            f'({err.strerror})'
        )
    if not os.access(path, os.W_OK | os.X_OK):
        parser.error(f'argument {flag}: the folder {path!r} is not writable')
    return path


# The committed results' index, in `benchmark/results/README.md` below this
# line:
INDEX_MARK = (
    '<!-- The index below is generated: python benchmark/report.py -->'
)
_COMMAND = re.compile(r'^Command: `(.+)`')
_COMMIT = re.compile(r'^- commit: (.+)$')


def result_header(path: str) -> dict:
    r"""The title, the command and the commit of the result file
    :obj:`path`: its first ``# `` line, its first ``Command: `...` `` line
    and its ``- commit:`` line. A file without them is a
    :class:`ValueError` that names it."""
    with open(path) as f:
        lines = f.read().splitlines()
    found = dict(
        title=next((li[2:] for li in lines if li.startswith('# ')), None),
        command=next(
            (m.group(1) for m in map(_COMMAND.match, lines) if m), None
        ),
        commit=next((m.group(1) for m in map(_COMMIT.match, lines) if m),
                    None),
    )  # fmt: skip
    missing = [key for key, value in found.items() if value is None]
    if missing:
        raise ValueError(
            f'{path}: no {", ".join(missing)} (a result file starts with '
            f"'# title', 'Command: `...`' and '- commit: ...' lines)"
        )
    return found


def results_index(folder: str = RESULTS) -> List[str]:
    r"""Markdown lines: every result file of :obj:`folder` (each
    :obj:`*.md` but the README) with its title, commit, the files of the
    same name (:obj:`.csv`, :obj:`.png`, ...) and its command; then the
    other files."""
    names = sorted(os.listdir(folder))
    results = [
        n for n in names if n.endswith('.md') and n != 'README.md'
    ]  # fmt: skip
    listed = set(results) | {'README.md'}
    lines = []
    for name in results:
        header = result_header(os.path.join(folder, name))
        stem = name[: -len('.md')]
        same = [n for n in names if n != name and n.startswith(stem + '.')]
        listed.update(same)
        also = f' (and {", ".join(f"`{n}`" for n in same)})' if same else ''
        lines += [
            f'- `{name}`{also}: {header["title"]}; commit {header["commit"]}.',
            f'  `{header["command"]}`',
        ]
    others = [n for n in names if n not in listed]
    if others:
        lines += ['', 'Also: ' + ', '.join(f'`{n}`' for n in others) + '.']
    return lines


def index_text(readme: str, folder: str = RESULTS) -> str:
    r""":obj:`readme` with everything below :data:`INDEX_MARK` replaced by
    :func:`results_index`."""
    if INDEX_MARK not in readme:
        raise ValueError(f'the README has no line {INDEX_MARK!r}')
    head = readme[: readme.index(INDEX_MARK) + len(INDEX_MARK)]
    return '\n'.join([head, '', *results_index(folder)]) + '\n'


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description='Write the index of the committed benchmark results '
        'into benchmark/results/README.md.'
    )
    parser.add_argument(
        '--check', action='store_true',
        help='write nothing; exit 1 if the README holds another index',
    )  # fmt: skip
    args = parser.parse_args(argv)
    path = os.path.join(RESULTS, 'README.md')
    with open(path) as f:
        readme = f.read()
    text = index_text(readme)
    if args.check:
        if text != readme:
            print(f'{path} is out of date: run python benchmark/report.py')
            return 1
        return 0
    with open(path + '.tmp', 'w') as f:
        f.write(text)
    os.replace(path + '.tmp', path)
    print(f'wrote {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
