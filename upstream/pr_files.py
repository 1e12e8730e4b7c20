r"""Editing a PyG checkout for a pull request: reading its files, the
CHANGELOG entry, and writing the changed files (every file is computed and
checked before the first one is written). Shared by ``make_pr.py``'s two
pull requests.
"""

import ast
import re
from pathlib import Path
from typing import Dict, List

NN_INIT_PATH = Path('torch_geometric', 'nn', 'conv', '__init__.py')
CHANGELOG_PATH = Path('CHANGELOG.md')
PR_URL = 'https://github.com/pyg-team/pytorch_geometric/pull/{pr}'
PLACEHOLDER = 'XXXX'  # The PR number until there is one.


class PRError(RuntimeError):
    r"""A step of the pull request cannot be done safely."""


def parse(text: str, where: str) -> ast.AST:
    try:
        return ast.parse(text)
    except SyntaxError as e:
        raise PRError(f'{where} does not parse: {e}') from e


def read(path: Path) -> str:
    if not path.is_file():
        raise PRError(f'{path} is missing')
    return path.read_text(encoding='utf-8')


def insert_after(text: str, anchor: str, new: str, path: Path) -> str:
    # Inserts the line `new` after the line `anchor`, unless it is there:
    lines = text.splitlines(keepends=True)
    if any(line.rstrip('\n') == new for line in lines):
        return text
    hits = [i for i, line in enumerate(lines) if line.rstrip('\n') == anchor]
    if len(hits) != 1:
        raise PRError(f'{path}: expected one line {anchor!r}, {len(hits)}')
    lines.insert(hits[0] + 1, new + '\n')
    return ''.join(lines)


def changelog(
    text: str,
    entry: str,
    pr: str = PLACEHOLDER,
    section: str = 'Added',
    path: Path = CHANGELOG_PATH,
) -> str:
    r"""Puts :obj:`entry` with the link to pull request :obj:`pr` first under
    the topmost unreleased :obj:`### {section}`, or updates it where it is.
    """
    if not (pr == PLACEHOLDER or re.fullmatch(r'[1-9][0-9]*', pr)):
        raise PRError(f'the PR number must be a positive integer, got {pr!r}')
    line = f'{entry} ([#{pr}]({PR_URL.format(pr=pr)}))'
    lines = text.splitlines(keepends=True)
    old = [i for i, old in enumerate(lines) if old.startswith(entry)]
    if len(old) > 1:
        raise PRError(f'{path}: {len(old)} lines {entry[:40]!r}...')
    if old:  # Ours, maybe with another PR number:
        lines[old[0]] = line + '\n'
        return ''.join(lines)
    start = next(
        (
            i
            for i, line in enumerate(lines)
            if line.startswith('## ') and 'unreleased' in line.lower()
        ),
        None,
    )
    if start is None:
        raise PRError(f'{path}: no "## [Unreleased]" section')
    heading = None
    for i in range(start + 1, len(lines)):
        if lines[i].startswith('## '):
            break
        if lines[i].rstrip() == f'### {section}':
            heading = i
            break
    if heading is None:
        raise PRError(f'{path}: no "### {section}" in the unreleased section')
    i = heading + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    new = [line + '\n']
    if i == len(lines) or not lines[i].startswith('- '):  # An empty section:
        new.append('\n')
    lines[i:i] = new
    if lines[heading + 1].strip():
        lines.insert(heading + 1, '\n')
    return ''.join(lines)


def write(pyg_dir: Path, files: Dict[Path, str]) -> List[Path]:
    r"""Writes the :obj:`files` that differ from :obj:`pyg_dir`'s and
    returns them; if a write fails, the error lists those written before.
    """
    changed = [
        path
        for path, text in files.items()
        if not (pyg_dir / path).is_file()
        or (pyg_dir / path).read_text(encoding='utf-8') != text
    ]
    for k, path in enumerate(changed):
        try:
            (pyg_dir / path).parent.mkdir(parents=True, exist_ok=True)
            (pyg_dir / path).write_text(files[path], encoding='utf-8')
        except OSError as e:
            done = [p.as_posix() for p in changed[:k]] or ['nothing']
            raise PRError(
                f'writing {path.as_posix()} failed ({e}); {pyg_dir} is partly '
                'changed, written before: ' + ', '.join(done)
            ) from e
    return changed
