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

# The script's folder is first on the module search path (python
# upstream/make_pr.py), as for any script and its own modules:
from attentivefp_rename import ATTENTIVE_FP_CLASS, rename_pr
from pr_files import (
    CHANGELOG_PATH,
    NN_INIT_PATH,
    PLACEHOLDER,
    PRError,
    changelog,
    insert_after,
    parse,
    read,
    write,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SOURCE = REPO / 'torch_geometric_gate' / 'nn' / 'conv' / 'gate_conv.py'
TEST_TEMPLATE = HERE / 'templates' / 'test_gate_conv.py'

README_PATH = Path('README.md')

OUR_PACKAGE = 'torch_geometric_gate'
MARKER = 'gate-kernels'  # The kernel hand-off's old markers.

# As short as PyG's other lines (a median of 131 characters at 5c6461b):
PAPER = (
    'the graph attention layer from "GATE: How to Keep Out Intrusive '
    'Neighbors" (ICML 2024)'
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
    tree = parse(text, where)
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
            for no, modules, names in _imports(parse(out, where))
            if 'GATEConv' in names and modules != [module]
        ],
    )
    return out


# The PyG checkout ############################################################


def export(init: str, path: Path = NN_INIT_PATH) -> str:
    r"""Imports and lists :class:`GATEConv` next to :class:`GATv2Conv`."""
    init = insert_after(
        init,
        'from .gatv2_conv import GATv2Conv',
        'from .gate_conv import GATEConv',
        path,
    )
    return insert_after(init, "    'GATv2Conv',", "    'GATEConv',", path)


def export_contrib(init: str, path: Path) -> str:
    r"""Imports :class:`GATEConv` and lists it last in
    :obj:`__all__ = classes = [...]`, the layout of the contrib packages'
    :obj:`__init__.py`.
    """
    body = parse(init, str(path)).body
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
    layer = read(source)
    check_layer(layer, str(source))
    init = home.folder / '__init__.py'
    add = export if home == NN else export_contrib
    files = {
        home.folder / 'gate_conv.py': for_pyg(layer, home.module, str(source)),
        home.test_folder / 'test_gate_conv.py': for_pyg(
            read(TEST_TEMPLATE), home.module, str(TEST_TEMPLATE)
        ),
        init: add(read(pyg_dir / init), init),
        CHANGELOG_PATH: changelog(
            read(pyg_dir / CHANGELOG_PATH), home.changelog, pr
        ),
    }
    if home == NN:
        files[README_PATH] = readme(read(pyg_dir / README_PATH))
    return files


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
