r"""The AttentiveFP rename, a pull request of its own (its description:
``upstream/attentivefp_rename.md``): AttentiveFP's internal, unexported
``GATEConv`` class becomes ``_AttentiveFPGATEConv``, with a deprecated
alias for the old name. Written by ``make_pr.py --rename-attentivefp``.
"""

import re
from pathlib import Path
from typing import Dict

from pr_files import (
    CHANGELOG_PATH,
    PLACEHOLDER,
    PRError,
    changelog,
    parse,
    read,
)

ATTENTIVE_FP_PATH = Path('torch_geometric', 'nn', 'models', 'attentive_fp.py')
ATTENTIVE_FP_CLASS = '_AttentiveFPGATEConv'
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
    parse(text, str(path))
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
            read(pyg_dir / ATTENTIVE_FP_PATH)
        ),
        CHANGELOG_PATH: changelog(
            read(pyg_dir / CHANGELOG_PATH), RENAME_ENTRY, pr, 'Changed'
        ),
    }
    files.update(rename_attentive_fp_imports(pyg_dir))
    return files
