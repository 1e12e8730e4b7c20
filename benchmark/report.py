r"""What every benchmark writes: the result files (a CSV and a markdown
table, each replaced whole), the lines above a table (the command that
wrote it, the machine, the script's description) and the checked output
folder.

The scripts import it as :obj:`report`, beside :obj:`common`.
"""

import csv
import datetime
import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from typing import List, Optional, Sequence

import torch
import torch_geometric


def describe(doc: str, paragraph: int = 1) -> str:
    r"""A paragraph of a script's docstring as one markdown line."""
    text = doc.split('\n\n')[paragraph].replace('\n', ' ').rstrip(':')
    return re.sub(r':\w+:`~?([^`]*)`', r'`\1`', text)


def command_line(script: str, argv: Optional[Sequence[str]] = None) -> str:
    r"""The command that produced a result file, as the user typed it."""
    args = list(argv) if argv is not None else sys.argv[1:]
    return shlex.join(['python', f'benchmark/{script}', *args])


def machine_info() -> List[str]:
    r"""Markdown list lines: date, CPU, GPU, versions, torch-scatter."""
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
        f'- date: {datetime.date.today().isoformat()}, commit: {_commit()}',
        f'- CPU: {cpu}, {os.cpu_count()} cores visible, torch threads '
        f'{torch.get_num_threads()}',
        f'- GPU: {gpu}',
        f'- Python {platform.python_version()}, torch {torch.__version__}, '
        f'torch_geometric {torch_geometric.__version__}',
        f'- torch-scatter: {scatter}, triton: {_triton_version()}',
    ]


def _commit() -> str:
    r"""The checkout's commit (:obj:`+dirty` with local changes to tracked
    files), or :obj:`unknown` outside a git checkout."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    git = ['git', '-C', root]
    try:
        head = subprocess.run(
            [*git, 'rev-parse', '--short', 'HEAD'],
            capture_output=True, text=True, timeout=20,
        )  # fmt: skip
        dirty = subprocess.run(
            [*git, 'status', '--porcelain', '--untracked-files=no'],
            capture_output=True, text=True, timeout=20,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return 'unknown'
    if head.returncode != 0:
        return 'unknown'
    return head.stdout.strip() + ('+dirty' if dirty.stdout.strip() else '')


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
