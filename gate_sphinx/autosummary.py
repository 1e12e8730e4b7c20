r"""API pages that follow each module's ``__all__``.

The directive

.. code-block:: rst

    .. gate-autosummary:: torch_geometric_gate.datasets

expands to an :mod:`sphinx.ext.autosummary` table of every public name the
module exports in ``__all__`` (classes first, then functions), with one
generated page per name under ``generated/``, as PyG's own API docs are laid
out. New public names therefore appear in the docs without editing them.

- A module without ``__all__`` is documented by the public names (no
  leading underscore) that it defines itself, not those it imports.
- A module that does not exist yet (a sibling feature still on its way) or
  whose ``__all__`` is empty renders a short note, not a warning.
- A module that exists but fails to import is a real error: it is reported
  as a Sphinx warning, which ``-W`` turns into a failed build.
- A class that overrides a base of the same name (the layer with its
  kernels over the upstream layer, :class:`torch_geometric_gate.GATEConv`)
  is documented as that base: its "Bases:" line names the base's bases and
  its page lists the members it inherits from that base (the template reads
  :data:`SHADOWS` through ``autosummary_context``).
- An object exported by several documented modules (for example a model that
  both ``torch_geometric_gate.nn`` and ``torch_geometric_gate.nn.models``
  export) is documented once, on the page of the most specific module that
  contains its definition, so no object is described twice.

The stub pages are written at ``builder-inited``, before Sphinx reads any
source file; stubs of names that left ``__all__`` are removed, so a renamed
class never leaves an orphan page behind.
"""

import importlib
import inspect
import os
import re
import shutil
import tempfile
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

DIRECTIVE = 'gate-autosummary'
PACKAGE = 'torch_geometric_gate'
TOCTREE = 'generated'  # relative to the source root
# The modules named by a directive anywhere in the project, collected at
# `builder-inited` (before any page is read).
_MODULES = []
# Full name of a class that shadows a base -> the classes above that base
# (its MRO), whose members its page does not list.
SHADOWS = {}
_DIRECTIVE_RE = re.compile(
    r'^\s*\.\.\s+' + re.escape(DIRECTIVE) + r'::\s*([A-Za-z0-9_.]+)\s*$'
)


class MissingModule(Exception):
    pass


def import_module(name):
    r"""Imports :obj:`name`; raises :class:`MissingModule` if the module (or
    a parent package) does not exist, and re-raises every other error."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        parts = name.split('.')
        missing = {'.'.join(parts[: i + 1]) for i in range(len(parts))}
        if e.name in missing:
            raise MissingModule(name) from e
        raise


def public_names(module):
    r"""Returns ``(kind, name, obj)`` for every entry of ``__all__`` (or,
    without ``__all__``, for every public name the module defines)."""
    names = getattr(module, '__all__', None)
    if names is None:  # The public names the module defines itself.
        names = [
            name
            for name, obj in vars(module).items()
            if not name.startswith('_')
            and getattr(obj, '__module__', None) == module.__name__
        ]
    out = []
    for name in names:
        if not hasattr(module, name):
            raise ValueError(
                f"'{module.__name__}.__all__' lists '{name}', "
                f'which the module does not define'
            )
        obj = getattr(module, name)
        if inspect.ismodule(obj):
            continue  # Sub-packages get their own page.
        if inspect.isclass(obj):
            kind = 'class'
        elif callable(obj):
            kind = 'function'
        else:
            continue  # Constants such as `__version__`.
        out.append((kind, name, obj))
    return out


def shadowed_base(cls, exported=None):
    r"""The base of :obj:`cls` that it shadows: its first base if that has
    the name :obj:`cls` is exported under (:obj:`exported`, default its own
    name) and is defined in this package, else :obj:`None`."""
    base = cls.__bases__[0] if cls.__bases__ else None
    if (
        base is not None
        and base.__name__ == (exported or cls.__name__)
        and base.__module__.split('.')[0] == PACKAGE
    ):
        return base
    return None


def _skip_shadowed_bases(app, name, obj, options, bases):
    # `autodoc-process-bases`: "Bases: GATEConv" says nothing to a reader;
    # the shadowed base's own bases are what the class is.
    exported = name.rpartition('.')[2]
    i = 0
    while i < len(bases):
        base = shadowed_base(obj, exported) if inspect.isclass(obj) else None
        if inspect.isclass(bases[i]) and base is bases[i]:
            bases[i : i + 1] = bases[i].__bases__
        else:
            i += 1


def _owner(obj, modules):
    r"""The most specific of :obj:`modules` that encloses the definition of
    :obj:`obj` (or :obj:`None` if none does)."""
    defined_in = getattr(obj, '__module__', '') or ''
    best = None
    for mod in modules:
        if defined_in == mod or defined_in.startswith(mod + '.'):
            if best is None or len(mod) > len(best):
                best = mod
    return best


def _scan(srcdir):
    r"""All modules named by the directive in the source tree."""
    modules = []
    for path in sorted(Path(srcdir).rglob('*.rst')):
        if TOCTREE in path.relative_to(srcdir).parts[:1]:
            continue
        for line in path.read_text(encoding='utf-8').splitlines():
            m = _DIRECTIVE_RE.match(line)
            if m and m.group(1) not in modules:
                modules.append(m.group(1))
    return modules


def entries(module_name):
    r"""What the directive for :obj:`module_name` lists: ``(kind, fullname)``
    for the names this page owns, or a note when there is nothing to list."""
    try:
        module = import_module(module_name)
    except MissingModule:
        return None, (
            f'The module :mod:`{module_name}` is not part of this release yet.'
        )
    documented = _MODULES
    out, elsewhere = [], []
    for kind, name, obj in public_names(module):
        owner = _owner(obj, documented)
        if owner is not None and owner != module_name:
            elsewhere.append(f':mod:`{owner}`')  # Documented there.
            continue
        out.append((kind, f'{module_name}.{name}'))
    if not out and elsewhere:
        return None, (
            f'The public names of :mod:`{module_name}` are documented with '
            f'the modules that define them: '
            f'{", ".join(sorted(set(elsewhere)))}.'
        )
    if not out:
        return None, (
            f'The module :mod:`{module_name}` exports no public names yet.'
        )
    return out, None


def _autosummary_lines(items, toctree):
    lines = []
    for kind, title in (('class', 'Classes'), ('function', 'Functions')):
        names = [name for k, name in items if k == kind]
        if not names:
            continue
        lines += [
            f'.. rubric:: {title}',
            '',
            '.. autosummary::',
            '   :nosignatures:',
            f'   :toctree: {toctree}',
            f'   :template: autosummary/{kind}.rst',
            '',
        ]
        lines += [f'   {name}' for name in names]
        lines.append('')
    return lines


def generate_stubs(app):
    r"""Writes one page per documented name (``builder-inited`` hook)."""
    srcdir = Path(app.srcdir)
    _MODULES[:] = _scan(srcdir)
    outdir = srcdir / TOCTREE
    items = []
    for module_name in _MODULES:
        try:
            found, _ = entries(module_name)
        except Exception as e:  # Reported again, with location, on parse.
            logger.warning(f'{DIRECTIVE}: {module_name}: {e!r}')
            continue
        items += found or []
    SHADOWS.clear()
    for kind, name in items:
        module_name, _, attr = name.rpartition('.')
        obj = getattr(import_module(module_name), attr)
        base = shadowed_base(obj, attr) if kind == 'class' else None
        if base is not None:
            SHADOWS[name] = ', '.join(c.__name__ for c in base.__mro__[1:])
    app.config.autosummary_context = {
        **app.config.autosummary_context,
        'shadows': dict(SHADOWS),
    }

    from sphinx.ext.autosummary.generate import generate_autosummary_docs

    if items:
        tmp = Path(tempfile.mkdtemp(prefix='gate-autosummary-'))
        try:
            source = tmp / 'index.rst'
            source.write_text(
                '\n'.join(_autosummary_lines(items, str(outdir))) + '\n',
                encoding='utf-8',
            )
            generate_autosummary_docs(
                [str(source)],
                suffix='.rst',
                app=app,
                imported_members=True,
                overwrite=True,
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    # One stub per documented name (`autosummary_filename_map` is unused).
    keep = {(outdir / f'{name}.rst').resolve() for _, name in items}
    if outdir.is_dir():
        for stale in outdir.glob('*.rst'):
            if stale.resolve() not in keep:
                stale.unlink()


class GateAutosummary(SphinxDirective):
    r"""``.. gate-autosummary:: module``: the module's public API."""

    required_arguments = 1
    has_content = False

    def run(self):
        module_name = self.arguments[0]
        try:
            items, note = entries(module_name)
        except Exception as e:
            logger.warning(
                f'{DIRECTIVE}: {module_name}: {e!r}',
                location=self.get_location(),
            )
            return []
        if items is None:
            lines = ['.. note::', '', f'   {note}', '']
        else:
            # Stub pages live in `generated/` under the source root.
            docdir = Path(self.env.doc2path(self.env.docname)).parent
            rel = os.path.relpath(Path(self.env.srcdir) / TOCTREE, docdir)
            short = [
                (kind, name[len(module_name) + 1 :]) for kind, name in items
            ]
            lines = [f'.. currentmodule:: {module_name}', '']
            lines += _autosummary_lines(short, Path(rel).as_posix())
        container = nodes.section()
        container.document = self.state.document
        self.state.nested_parse(
            StringList(lines, source=self.get_source_info()[0]),
            self.content_offset,
            container,
            match_titles=False,
        )
        return container.children


def _document_exported_classes_by_name():
    # Autodoc (Sphinx >= 9) documents a class exported under another name
    # than its own as an alias ("alias of KernelGATEConv"). A class exported
    # under the name of the base it shadows is that class to a reader:
    # documented in full, under the exported name.
    from sphinx.ext.autodoc._property_types import _ClassDefProperties

    alias = _ClassDefProperties.doc_as_attr.fget

    def doc_as_attr(props) -> bool:
        obj = getattr(props, '_obj', None)
        if inspect.isclass(obj) and shadowed_base(obj, props.parts[-1]):
            return False
        return alias(props)

    _ClassDefProperties.doc_as_attr = property(doc_as_attr)


def setup(app):
    app.add_directive(DIRECTIVE, GateAutosummary)
    _document_exported_classes_by_name()
    # Before autosummary's own `builder-inited` hook (priority 500).
    app.connect('builder-inited', generate_stubs, priority=400)
    app.connect('autodoc-process-bases', _skip_shadowed_bases)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
