r"""Writes the pull request that adds :class:`GATEConv` to PyG into a PyG
checkout.

Usage::

    python upstream/make_pr.py PYG_DIR [--pr NUMBER]

It generates, never copies by hand:

* ``torch_geometric/nn/conv/gate_conv.py`` from this repository's
  ``torch_geometric_gate/nn/conv/gate_conv.py``, with the hand-off to the
  memory-lean kernels of ``torch_geometric_gate.ops`` cut out (the lines
  marked ``# gate-kernels``), so that PyG's copy is the reference path;
* ``test/nn/conv/test_gate_conv.py`` from ``upstream/templates/``;
* the export in ``torch_geometric/nn/conv/__init__.py``, a CHANGELOG line
  and a README entry next to ``GATv2Conv``'s;
* the rename of AttentiveFP's internal ``GATEConv`` class (unexported, in
  ``torch_geometric/nn/models/attentive_fp.py``) to ``_AttentiveFPGATEConv``,
  with a deprecated module-level alias for the old name.

Running it again on the same checkout changes nothing.
"""

import argparse
import ast
import re
import sys
from pathlib import Path
from typing import List, Optional, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SOURCE = REPO / 'torch_geometric_gate' / 'nn' / 'conv' / 'gate_conv.py'
TEST_TEMPLATE = HERE / 'templates' / 'test_gate_conv.py'

CONV_PATH = Path('torch_geometric', 'nn', 'conv', 'gate_conv.py')
TEST_PATH = Path('test', 'nn', 'conv', 'test_gate_conv.py')
INIT_PATH = Path('torch_geometric', 'nn', 'conv', '__init__.py')
ATTENTIVE_FP_PATH = Path('torch_geometric', 'nn', 'models', 'attentive_fp.py')
CHANGELOG_PATH = Path('CHANGELOG.md')
README_PATH = Path('README.md')

# The markers of the kernel hand-off in our gate_conv.py:
IMPORT_MARK = '# gate-kernels'
BEGIN_MARK = '# gate-kernels: begin'
END_MARK = '# gate-kernels: end'
DEDENT_END_MARK = '# gate-kernels: dedent end'
DEDENT = ' ' * 4

OUR_IMPORT = 'from torch_geometric_gate import GATEConv'
PYG_IMPORT = 'from torch_geometric.nn import GATEConv'
OUR_PACKAGE = 'torch_geometric_gate'

ATTENTIVE_FP_CLASS = '_AttentiveFPGATEConv'

PR_URL = 'https://github.com/pyg-team/pytorch_geometric/pull/{pr}'
CHANGELOG_ENTRY = (
    '- Added `GATEConv`, the GATE graph attention layer from "GATE: How to '
    'Keep Out Intrusive Neighbors" (ICML 2024), a `GATv2Conv` that scores '
    'the self-loop with an attention vector of its own so that nodes can '
    'switch neighborhood aggregation off, and renamed the internal '
    f'`GATEConv` of `AttentiveFP` to `{ATTENTIVE_FP_CLASS}` '
    '([#{pr}](' + PR_URL + '))'
)
README_ENTRY = (
    '- **[GATEConv](https://pytorch-geometric.readthedocs.io/en/latest/'
    'generated/torch_geometric.nn.conv.GATEConv.html)** from Mustafa and '
    'Burkholz: [GATE: How to Keep Out Intrusive Neighbors]'
    '(https://arxiv.org/abs/2406.00418) (ICML 2024)'
)

ALIAS = f"""

def __getattr__(name: str):
    # `GATEConv` was the name of `{ATTENTIVE_FP_CLASS}` up to PyG 2.8 (now
    # `torch_geometric.nn.GATEConv` is the GATE layer). Keeps old imports and
    # pickled models working:
    if name == 'GATEConv':
        import warnings
        warnings.warn(
            "'torch_geometric.nn.models.attentive_fp.GATEConv' is deprecated "
            "and will be removed, it is AttentiveFP's internal layer "
            "'{ATTENTIVE_FP_CLASS}' now ('torch_geometric.nn.GATEConv' is "
            "the GATE layer of Mustafa and Burkholz)", DeprecationWarning,
            stacklevel=2)
        return {ATTENTIVE_FP_CLASS}
    raise AttributeError(f"module {{__name__!r}} has no attribute {{name!r}}")
"""


class PRError(RuntimeError):
    r"""A step of the pull request cannot be done safely."""


# The layer ###################################################################


def _paren_depth(line: str) -> int:
    code = line.split('#', 1)[0]
    return code.count('(') - code.count(')')


def strip_kernels(text: str) -> str:
    r"""Cuts the kernel hand-off out of our :obj:`gate_conv.py`.

    * An import statement whose first line ends in :obj:`# gate-kernels` is
      dropped (all its lines, if it is parenthesized), and, where it stood
      between blank lines, the blank line after it.
    * The lines from :obj:`# gate-kernels: begin ...` through
      :obj:`# gate-kernels: end ...` are dropped.
    * The lines after that, up to :obj:`# gate-kernels: dedent end` (which is
      dropped too), lose 4 leading spaces.
    """
    out: List[str] = []
    state, depth, squeeze = 'copy', 0, False
    for no, line in enumerate(text.splitlines(keepends=True), 1):
        stripped = line.strip()
        where = f'{SOURCE.name}:{no}'
        if state == 'import':
            depth += _paren_depth(line)
            if depth <= 0:
                state = 'copy'
            continue
        if squeeze:  # No two blank lines where the import was:
            squeeze = False
            if not stripped:
                continue
        if state == 'drop':
            if stripped.startswith(END_MARK):
                state = 'dedent'
            elif 'gate-kernels' in stripped:
                raise PRError(f'{where}: unexpected marker inside a block')
            continue
        if state == 'dedent':
            if stripped.startswith(DEDENT_END_MARK):
                state = 'copy'
            elif 'gate-kernels' in stripped:
                raise PRError(f'{where}: unexpected marker before dedent end')
            elif not stripped:
                out.append(line.lstrip(' \t'))
            elif line.startswith(DEDENT):
                out.append(line[len(DEDENT) :])
            else:
                raise PRError(f'{where}: cannot dedent {line.rstrip()!r}')
            continue
        if stripped.startswith(BEGIN_MARK):
            state = 'drop'
            continue
        if line.rstrip().endswith(IMPORT_MARK) and stripped.startswith(
            ('import ', 'from ')
        ):
            depth = _paren_depth(line)
            state = 'import' if depth > 0 else 'copy'
            squeeze = bool(out) and not out[-1].strip()
            continue
        if 'gate-kernels' in stripped:
            raise PRError(f'{where}: marker out of place: {stripped!r}')
        out.append(line)
    if state != 'copy':
        raise PRError(f'{SOURCE.name}: a gate-kernels block is not closed')
    return ''.join(out)


def _dropped_names(text: str) -> List[str]:
    # The names that the marked import statements bind:
    lines = text.splitlines(keepends=True)
    names: List[str] = []
    for node in ast.parse(text).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            first = lines[node.lineno - 1]
            if first.rstrip().endswith(IMPORT_MARK):
                names += [
                    (alias.asname or alias.name).split('.')[0]
                    for alias in node.names
                ]
    return names


def to_pyg(text: str) -> str:
    r"""PyG's :obj:`gate_conv.py` from ours: the kernel hand-off cut out,
    the docstring example importing from :obj:`torch_geometric.nn`.
    """
    dropped = _dropped_names(text)
    out = strip_kernels(text).replace(OUR_IMPORT, PYG_IMPORT)
    left = [
        f'{no}: {line.strip()}'
        for no, line in enumerate(out.splitlines(), 1)
        if OUR_PACKAGE in line
    ]
    if left:
        raise PRError(
            f"PyG's gate_conv.py would still mention {OUR_PACKAGE!r} "
            '(mark the lines with # gate-kernels or extend upstream/make_pr.py'
            '):\n  ' + '\n  '.join(left)
        )
    try:
        tree = ast.parse(out)
    except SyntaxError as e:
        raise PRError(f"PyG's gate_conv.py does not parse: {e}") from e
    used = {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and node.id in dropped
    }
    if used:
        raise PRError(
            f"PyG's gate_conv.py still uses {sorted(used)}, which only the "
            'dropped # gate-kernels import defines'
        )
    if 'class GATEConv(' not in out:
        raise PRError("PyG's gate_conv.py lost 'class GATEConv'")
    return out


# The PyG checkout ############################################################


def _read(path: Path) -> str:
    if not path.is_file():
        raise PRError(f'{path} is missing')
    return path.read_text(encoding='utf-8')


def _write(path: Path, text: str) -> bool:
    if path.is_file() and path.read_text(encoding='utf-8') == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding='utf-8')
    return True


def _insert_after(text: str, anchor: str, new: str, path: Path) -> str:
    # Inserts the line `new` after the line `anchor`, unless it is there:
    lines = text.splitlines(keepends=True)
    if any(line.rstrip('\n') == new for line in lines):
        return text
    hits = [i for i, line in enumerate(lines) if line.rstrip('\n') == anchor]
    if len(hits) != 1:
        raise PRError(f'{path}: expected one line {anchor!r}, {len(hits)}')
    lines.insert(hits[0] + 1, new + '\n')
    return ''.join(lines)


def export(init: str, path: Path = INIT_PATH) -> str:
    r"""Imports and lists :class:`GATEConv` next to :class:`GATv2Conv`."""
    init = _insert_after(
        init,
        'from .gatv2_conv import GATv2Conv',
        'from .gate_conv import GATEConv',
        path,
    )
    return _insert_after(init, "    'GATv2Conv',", "    'GATEConv',", path)


def changelog(text: str, pr: str, path: Path = CHANGELOG_PATH) -> str:
    r"""Puts :obj:`CHANGELOG_ENTRY` first under the topmost unreleased
    :obj:`### Added`, or updates it where it is.
    """
    entry = CHANGELOG_ENTRY.format(pr=pr)
    lines = text.splitlines(keepends=True)
    old = [i for i, line in enumerate(lines) if '- Added `GATEConv`' in line]
    if len(old) > 1:
        raise PRError(f'{path}: {len(old)} GATEConv entries')
    if old:  # Ours, maybe with another PR number:
        lines[old[0]] = entry + '\n'
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
    added = None
    for i in range(start + 1, len(lines)):
        if lines[i].startswith('## '):
            break
        if lines[i].rstrip() == '### Added':
            added = i
            break
    if added is None:
        raise PRError(f'{path}: no "### Added" in the unreleased section')
    i = added + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    new = [entry + '\n']
    if not lines[i].startswith('- '):  # An empty "### Added":
        new.append('\n')
    lines[i:i] = new
    if lines[added + 1].strip():
        lines.insert(added + 1, '\n')
    return ''.join(lines)


def readme(text: str, path: Path = README_PATH) -> str:
    r"""Lists :class:`GATEConv` after :class:`GATv2Conv` among the layers."""
    if README_ENTRY in text:
        return text
    lines = text.splitlines(keepends=True)
    hits = [
        i for i, line in enumerate(lines) if line.startswith('- **[GATv2Conv]')
    ]
    if len(hits) != 1:
        raise PRError(f"{path}: expected one '- **[GATv2Conv]' line")
    lines.insert(hits[0] + 1, README_ENTRY + '\n')
    return ''.join(lines)


def _wrap_call(match: re.Match) -> str:
    # Re-wraps `<indent>self.gate_conv = Name(args)` in yapf's style, within
    # 79 characters:
    head = f'{match["indent"]}{match["lhs"]}{match["name"]}('
    args = [arg.strip() for arg in match['args'].split(',') if arg.strip()]
    lines, line = [], head
    for k, arg in enumerate(args):
        piece = arg + (',' if k < len(args) - 1 else ')')
        if (
            line != head
            and not line.endswith('(')
            and (len(line) + 1 + len(piece) > 79)
        ):
            lines.append(line)
            line = ' ' * len(head) + piece
        else:
            sep = '' if line.endswith('(') or line.isspace() else ' '
            line = f'{line}{sep}{piece}'
    lines.append(line)
    return '\n'.join(lines)


def rename_attentive_fp(text: str, path: Path = ATTENTIVE_FP_PATH) -> str:
    r"""Renames AttentiveFP's internal :obj:`GATEConv` class (state-dict
    keys are attribute names, as :obj:`gate_conv.lin1.weight`, so they stay)
    and adds a deprecated alias for the old name.
    """
    if f'class {ATTENTIVE_FP_CLASS}(' in text:
        return text  # Done already.
    if 'class GATEConv(' not in text:
        raise PRError(f"{path}: no 'class GATEConv(' to rename")
    text = re.sub(r'\bGATEConv\b', ATTENTIVE_FP_CLASS, text)
    text = re.sub(
        rf'(?P<indent>[ ]*)(?P<lhs>self\.gate_conv = )'
        rf'(?P<name>{ATTENTIVE_FP_CLASS})\((?P<args>[^()]*)\)',
        _wrap_call,
        text,
    )
    text = text.rstrip('\n') + '\n' + ALIAS
    long = [
        f'{no}: {line}'
        for no, line in enumerate(text.splitlines(), 1)
        if len(line) > 79
    ]
    if long:
        raise PRError(f'{path}: lines too long after the rename: {long}')
    ast.parse(text)
    return text


def rename_attentive_fp_imports(pyg_dir: Path) -> List[Path]:
    r"""Rewrites :obj:`from torch_geometric.nn.models.attentive_fp import
    GATEConv` in PyG's tree (none at 5c6461b).
    """
    pattern = re.compile(
        r'^(?P<head>\s*from torch_geometric\.nn\.models\.attentive_fp '
        r'import )GATEConv$',
        re.MULTILINE,
    )
    changed = []
    for sub in ('torch_geometric', 'test', 'examples', 'benchmark'):
        for path in sorted((pyg_dir / sub).rglob('*.py')):
            if path.name == 'attentive_fp.py':
                continue
            text = path.read_text(encoding='utf-8')
            if 'attentive_fp' not in text or 'GATEConv' not in text:
                continue
            new = pattern.sub(rf'\g<head>{ATTENTIVE_FP_CLASS}', text)
            if re.search(r'attentive_fp\b[^\n]*\bGATEConv\b', new):
                raise PRError(
                    f'{path} uses attentive_fp.GATEConv in a way '
                    'make_pr.py cannot rewrite; rename it by hand'
                )
            if _write(path, new):
                changed.append(path)
    return changed


def make_pr(pyg_dir: Path, pr: str = 'XXXX') -> List[Path]:
    r"""Applies the pull request to the PyG checkout :obj:`pyg_dir` and
    returns the files it changed.
    """
    conv = to_pyg(_read(SOURCE))
    test = _read(TEST_TEMPLATE)
    ast.parse(test)

    files = {
        CONV_PATH: conv,
        TEST_PATH: test,
        INIT_PATH: export(_read(pyg_dir / INIT_PATH)),
        CHANGELOG_PATH: changelog(_read(pyg_dir / CHANGELOG_PATH), pr),
        README_PATH: readme(_read(pyg_dir / README_PATH)),
        ATTENTIVE_FP_PATH: rename_attentive_fp(
            _read(pyg_dir / ATTENTIVE_FP_PATH)
        ),
    }
    changed = [
        pyg_dir / path
        for path, text in files.items()
        if _write(pyg_dir / path, text)
    ]
    return changed + rename_attentive_fp_imports(pyg_dir)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description='Writes the GATEConv pull request into a PyG checkout.'
    )
    parser.add_argument(
        'pyg_dir', metavar='PYG_DIR', type=Path, help='a PyG checkout'
    )
    parser.add_argument(
        '--pr',
        default='XXXX',
        help='the pull request number for the CHANGELOG (default: XXXX)',
    )
    args = parser.parse_args(argv)
    pyg_dir = args.pyg_dir.resolve()
    if not (pyg_dir / INIT_PATH).is_file():
        parser.error(
            f'{args.pyg_dir} is not a PyG checkout: '
            f'{INIT_PATH.as_posix()} is missing'
        )
    try:
        changed = make_pr(pyg_dir, args.pr)
    except PRError as e:
        print(f'make_pr.py: error: {e}', file=sys.stderr)
        return 1
    for path in changed:
        print(f'wrote {path.relative_to(pyg_dir).as_posix()}')
    if not changed:
        print(f'{pyg_dir} is up to date')
    return 0


if __name__ == '__main__':
    sys.exit(main())
