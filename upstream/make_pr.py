r"""Writes a pull request to PyG into a PyG checkout.

Usage::

    python upstream/make_pr.py PYG_DIR [--contrib] [--pr N] [--source FILE]
    python upstream/make_pr.py PYG_DIR --rename-attentivefp [--pr N]

The first adds :class:`GATEConv` (its description: ``upstream/README.md``):

* the layer, a copy of this repository's
  ``torch_geometric_gate/nn/conv/gate_conv.py`` (PyG's file as it is: it
  imports only the standard library, ``torch`` and ``torch_geometric``),
  into ``torch_geometric/nn/conv/``, or with :obj:`--contrib` into
  ``torch_geometric/contrib/nn/conv/``, the staging area that PyG's
  ``.github/CONTRIBUTING.md`` suggests for new features;
* its test, from ``upstream/templates/test_gate_conv.py``, into the
  matching ``test/`` folder, with the import of :class:`GATEConv` rewritten
  for that home;
* the export in that folder's ``__init__.py``, a CHANGELOG line and (not in
  :obj:`--contrib`, whose layers PyG's README does not list) a README entry.

The second renames AttentiveFP's internal, unexported ``GATEConv`` class to
``_AttentiveFPGATEConv``, with a deprecated alias for the old name (its
description: ``upstream/attentivefp_rename.md``).

Every file is computed and checked before the first one is written, so an
error leaves the checkout as it was. Running it again changes nothing.
"""

import argparse
import ast
import re
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SOURCE = REPO / 'torch_geometric_gate' / 'nn' / 'conv' / 'gate_conv.py'
TEST_TEMPLATE = HERE / 'templates' / 'test_gate_conv.py'

NN_INIT_PATH = Path('torch_geometric', 'nn', 'conv', '__init__.py')
ATTENTIVE_FP_PATH = Path('torch_geometric', 'nn', 'models', 'attentive_fp.py')
CHANGELOG_PATH = Path('CHANGELOG.md')
README_PATH = Path('README.md')

OUR_PACKAGE = 'torch_geometric_gate'
MARKER = 'gate-kernels'  # The kernel hand-off's old markers.
ATTENTIVE_FP_CLASS = '_AttentiveFPGATEConv'

PR_URL = 'https://github.com/pyg-team/pytorch_geometric/pull/{pr}'
PLACEHOLDER = 'XXXX'  # The PR number until there is one.
PAPER = (
    'the GATE graph attention layer from "GATE: How to Keep Out Intrusive '
    'Neighbors" (ICML 2024), a `GATv2Conv` that scores the self-loop with an '
    'attention vector of its own so that nodes can switch neighborhood '
    'aggregation off'
)
README_ENTRY = (
    '- **[GATEConv](https://pytorch-geometric.readthedocs.io/en/latest/'
    'generated/torch_geometric.nn.conv.GATEConv.html)** from Mustafa and '
    'Burkholz: [GATE: How to Keep Out Intrusive Neighbors]'
    '(https://arxiv.org/abs/2406.00418) (ICML 2024)'
)


class Home(NamedTuple):
    r"""Where :class:`GATEConv` goes in PyG's tree."""

    module: str  # Where users (and the test) import it from.
    folder: Path  # Where its file goes.
    changelog: str  # Its CHANGELOG line (before the PR link).

    @property
    def test_folder(self) -> Path:
        return Path('test', *self.folder.parts[1:])


NN = Home(
    'torch_geometric.nn',
    Path('torch_geometric', 'nn', 'conv'),
    f'- Added `GATEConv`, {PAPER}',
)
CONTRIB = Home(
    'torch_geometric.contrib.nn.conv',
    Path('torch_geometric', 'contrib', 'nn', 'conv'),
    f'- Added `torch_geometric.contrib.nn.conv.GATEConv`, {PAPER}',
)
# The CHANGELOG line of the AttentiveFP rename, under "### Changed":
RENAME_ENTRY = (
    f'- Renamed the internal `GATEConv` layer of `AttentiveFP` to '
    f'`{ATTENTIVE_FP_CLASS}` (the old name stays as a deprecated alias)'
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


# The layer and its test ######################################################

# `from M import A, B` naming GATEConv, in code or in a docstring example:
IMPORT_LINE = re.compile(
    r'^(?P<head>[ ]*(?:>>> )?)from (?P<module>[\w.]+) import '
    r'(?P<names>\w+(?:, \w+)*)$',
    re.MULTILINE,
)
REWRITABLE = (OUR_PACKAGE, 'torch_geometric.nn', 'torch_geometric.nn.conv')


def rewrite_imports(text: str, module: str) -> str:
    r"""Imports :class:`GATEConv` from :obj:`module` wherever the one-line
    imports of :obj:`text` take it from our package or from
    :obj:`torch_geometric.nn[.conv]`; the other names stay where they were,
    on a line of their own, in isort's order.
    """

    def rewrite(match: re.Match) -> str:
        names = match['names'].split(', ')
        if match['module'] not in REWRITABLE or 'GATEConv' not in names:
            return match[0]
        rest = [name for name in names if name != 'GATEConv']
        if match['module'] == OUR_PACKAGE and rest:
            return match[0]  # Names PyG lacks: refused by the caller.
        if match['module'] == module or not rest:
            imports = {module: ['GATEConv'] + rest}
        else:
            imports = {module: ['GATEConv'], match['module']: rest}
        return '\n'.join(
            f'{match["head"]}from {name} import '
            + ', '.join(sorted(imported, key=str.lower))
            for name, imported in sorted(imports.items())
        )

    return IMPORT_LINE.sub(rewrite, text)


def _parse(text: str, where: str) -> ast.AST:
    try:
        return ast.parse(text)
    except SyntaxError as e:
        raise PRError(f'{where} does not parse: {e}') from e


def _imports(tree: ast.AST) -> List[Tuple[int, List[str], List[str]]]:
    # (line, modules, imported names) of every import statement:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names]
        if isinstance(node, ast.Import):
            found.append((node.lineno, names, []))
        elif isinstance(node, ast.ImportFrom):
            module = '.' * node.level + (node.module or '')
            found.append((node.lineno, [module], names))
    return found


def _refuse(problem: str, text: str, numbers: Sequence[int]) -> None:
    # Raises with the offending lines of `text`, if there are any:
    if numbers:
        lines = text.splitlines()
        raise PRError(
            problem
            + ''.join(f'\n  {no}: {lines[no - 1].strip()}' for no in numbers)
        )


def check_layer(text: str, where: str) -> None:
    r"""Refuses a layer that is not PyG's file as it is: a
    :obj:`# gate-kernels` marker, an import of anything but the standard
    library, :obj:`torch` and :obj:`torch_geometric`, or no
    :obj:`class GATEConv`.
    """
    lines = enumerate(text.splitlines(), 1)
    _refuse(
        f'{where} still has {MARKER} markers; PyG gets the layer file as it '
        'is, so the kernel hand-off belongs in the package, not in this file:',
        text,
        [no for no, line in lines if MARKER in line],
    )
    tree = _parse(text, where)
    allowed = set(sys.stdlib_module_names) | {'torch', 'torch_geometric'}
    _refuse(
        f"{where} imports {OUR_PACKAGE} or another package; PyG's copy may "
        'import only the standard library, torch and torch_geometric:',
        text,
        [
            no
            for no, modules, _ in _imports(tree)
            if any(name.split('.')[0] not in allowed for name in modules)
        ],
    )
    if not any(
        isinstance(node, ast.ClassDef) and node.name == 'GATEConv'
        for node in tree.body
    ):
        raise PRError(f"{where} defines no 'class GATEConv'")


def for_pyg(text: str, module: str, where: str) -> str:
    r""":obj:`text` (the layer or its test) with :class:`GATEConv` imported
    from :obj:`module`; refuses what is left of our package and any other
    import of :class:`GATEConv`.
    """
    out = rewrite_imports(text, module)
    _refuse(
        f'{where} would still mention {OUR_PACKAGE!r} in PyG; make_pr.py '
        'rewrites only one-line imports of GATEConv alone:',
        out,
        [
            no
            for no, line in enumerate(out.splitlines(), 1)
            if OUR_PACKAGE in line
        ],
    )
    _refuse(
        f'{where} imports GATEConv from elsewhere than {module} in a way '
        'make_pr.py cannot rewrite (it rewrites one-line imports):',
        out,
        [
            no
            for no, modules, names in _imports(_parse(out, where))
            if 'GATEConv' in names and modules != [module]
        ],
    )
    return out


# The PyG checkout ############################################################


def _read(path: Path) -> str:
    if not path.is_file():
        raise PRError(f'{path} is missing')
    return path.read_text(encoding='utf-8')


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


def export(init: str, path: Path = NN_INIT_PATH) -> str:
    r"""Imports and lists :class:`GATEConv` next to :class:`GATv2Conv`."""
    init = _insert_after(
        init,
        'from .gatv2_conv import GATv2Conv',
        'from .gate_conv import GATEConv',
        path,
    )
    return _insert_after(init, "    'GATv2Conv',", "    'GATEConv',", path)


def export_contrib(init: str, path: Path) -> str:
    r"""Imports :class:`GATEConv` and lists it last in
    :obj:`__all__ = classes = [...]`, the layout of the contrib packages'
    :obj:`__init__.py`.
    """
    body = _parse(init, str(path)).body
    imports = [node for node in body if isinstance(node, ast.ImportFrom)]
    lists = [
        node
        for node in body
        if isinstance(node, ast.Assign)
        and [ast.unparse(target) for target in node.targets]
        == ['__all__', 'classes']
    ]
    if len(imports) + len(lists) != len(body) or len(lists) != 1:
        raise PRError(
            f'{path}: expected relative imports and one '
            "'__all__ = classes = [...]', add GATEConv by hand"
        )
    names = ast.literal_eval(lists[0].value)
    lines = [ast.unparse(node) for node in imports]
    ours = 'from .gate_conv import GATEConv'
    if ours in lines and 'GATEConv' in names:
        return init
    lines += [] if ours in lines else [ours]
    names += [] if 'GATEConv' in names else ['GATEConv']
    listed = ''.join(f'    {name!r},\n' for name in names)
    return '\n'.join(lines) + f'\n\n__all__ = classes = [\n{listed}]\n'


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


def gate_conv_pr(
    pyg_dir: Path,
    pr: str = PLACEHOLDER,
    home: Home = NN,
    source: Path = SOURCE,
) -> Dict[Path, str]:
    r"""The files of the :class:`GATEConv` pull request, by their path in
    :obj:`pyg_dir`.
    """
    other = CONTRIB if home == NN else NN
    if (pyg_dir / other.folder / 'gate_conv.py').exists():
        raise PRError(
            f'{pyg_dir} has {(other.folder / "gate_conv.py").as_posix()} '
            'already (the other home); start from a fresh checkout'
        )
    layer = _read(source)
    check_layer(layer, str(source))
    init = home.folder / '__init__.py'
    add = export if home == NN else export_contrib
    files = {
        home.folder / 'gate_conv.py': for_pyg(layer, home.module, str(source)),
        home.test_folder / 'test_gate_conv.py': for_pyg(
            _read(TEST_TEMPLATE), home.module, str(TEST_TEMPLATE)
        ),
        init: add(_read(pyg_dir / init), init),
        CHANGELOG_PATH: changelog(
            _read(pyg_dir / CHANGELOG_PATH), home.changelog, pr
        ),
    }
    if home == NN:
        files[README_PATH] = readme(_read(pyg_dir / README_PATH))
    return files


# The AttentiveFP rename ######################################################


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
    _parse(text, str(path))
    return text


def rename_attentive_fp_imports(pyg_dir: Path) -> Dict[Path, str]:
    r"""Rewrites :obj:`from torch_geometric.nn.models.attentive_fp import
    GATEConv` in PyG's tree (none at 5c6461b); refuses any other use of the
    old name.
    """
    pattern = re.compile(
        r'^(?P<head>\s*from torch_geometric\.nn\.models\.attentive_fp '
        r'import )GATEConv$',
        re.MULTILINE,
    )
    files = {}
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
            files[path.relative_to(pyg_dir)] = new
    return files


def rename_pr(pyg_dir: Path, pr: str = PLACEHOLDER) -> Dict[Path, str]:
    r"""The files of the AttentiveFP rename, by their path in
    :obj:`pyg_dir`.
    """
    files = {
        ATTENTIVE_FP_PATH: rename_attentive_fp(
            _read(pyg_dir / ATTENTIVE_FP_PATH)
        ),
        CHANGELOG_PATH: changelog(
            _read(pyg_dir / CHANGELOG_PATH), RENAME_ENTRY, pr, 'Changed'
        ),
    }
    files.update(rename_attentive_fp_imports(pyg_dir))
    return files


# Writing #####################################################################


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


def make_pr(
    pyg_dir: Path,
    pr: str = PLACEHOLDER,
    contrib: bool = False,
    source: Path = SOURCE,
) -> List[Path]:
    r"""Applies the :class:`GATEConv` pull request to the PyG checkout
    :obj:`pyg_dir` and returns the files it changed.
    """
    files = gate_conv_pr(pyg_dir, pr, CONTRIB if contrib else NN, source)
    return write(pyg_dir, files)


def _pr_number(value: str) -> str:
    if not re.fullmatch(r'[1-9][0-9]*', value):
        raise argparse.ArgumentTypeError(
            f'expected a positive integer (the pull request number), got '
            f'{value!r}'
        )
    return value


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description='Writes the GATEConv pull request (or, with '
        '--rename-attentivefp, the AttentiveFP rename) into a PyG checkout.'
    )
    parser.add_argument(
        'pyg_dir', metavar='PYG_DIR', type=Path, help='a PyG checkout'
    )
    parser.add_argument(
        '--pr',
        type=_pr_number,
        metavar='NUMBER',
        help=f'the pull request number for the CHANGELOG (default: '
        f'{PLACEHOLDER})',
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        '--contrib',
        action='store_true',
        help='add the layer to torch_geometric.contrib.nn.conv instead of '
        'torch_geometric.nn.conv',
    )
    mode.add_argument(
        '--rename-attentivefp',
        action='store_true',
        help=f"write the other pull request: AttentiveFP's internal GATEConv "
        f'becomes {ATTENTIVE_FP_CLASS}',
    )
    parser.add_argument(
        '--source',
        type=Path,
        metavar='FILE',
        help="the layer file to copy (default: this repository's "
        'torch_geometric_gate/nn/conv/gate_conv.py)',
    )
    args = parser.parse_args(argv)
    pyg_dir = args.pyg_dir.resolve()
    if not (pyg_dir / NN_INIT_PATH).is_file():
        parser.error(
            f'{args.pyg_dir} is not a PyG checkout: '
            f'{NN_INIT_PATH.as_posix()} is missing'
        )
    if args.rename_attentivefp and args.source:
        parser.error(
            '--source is the layer of the GATEConv pull request, '
            'not of --rename-attentivefp'
        )
    pr = args.pr or PLACEHOLDER
    try:
        if args.rename_attentivefp:
            changed = write(pyg_dir, rename_pr(pyg_dir, pr))
        else:
            changed = make_pr(pyg_dir, pr, args.contrib, args.source or SOURCE)
    except PRError as e:
        print(f'make_pr.py: error: {e}', file=sys.stderr)
        return 1
    for path in changed:
        print(f'wrote {path.as_posix()}')
    if not changed:
        print(f'{pyg_dir} is up to date')
    return 0


if __name__ == '__main__':
    sys.exit(main())
