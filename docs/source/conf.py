"""Sphinx configuration of the torch-geometric-gate documentation.

Build (warnings are errors, no network needed)::

    sphinx-build -W --keep-going -b html docs/source docs/build/html
    sphinx-build -W --keep-going -b doctest docs/source docs/build/doctest

Environment variables:

- ``GATE_DOCS_MATHJAX``: path or URL of a local ``tex-chtml.js`` (npm's
  ``mathjax@3`` package), to render math without the MathJax CDN.
- ``GATE_DOCS_INTERSPHINX=1``: link PyTorch, PyG and Python through their
  intersphinx inventories (needs network). Without it, the offline resolver
  in ``gate_sphinx/xref.py`` builds those links.
"""

import datetime
import doctest
import os
from pathlib import Path

import torch_geometric_gate  # installed: pip install -e ".[docs]"

project = 'torch-geometric-gate'
author = 'torch-geometric-gate developers'
copyright = f'{datetime.date.today().year}, {author}'
version = release = torch_geometric_gate.__version__

extensions = [
    'sphinx.ext.autodoc',
    'sphinx.ext.autosummary',
    'sphinx.ext.doctest',
    'sphinx.ext.mathjax',
    'sphinx.ext.napoleon',
    'sphinx.ext.viewcode',
    'myst_parser',
    # The project's own (gate_sphinx/, importable after the editable install):
    'gate_sphinx.autosummary',
    'gate_sphinx.results',
    'gate_sphinx.xref',
]

source_suffix = {'.rst': 'restructuredtext', '.md': 'markdown'}
root_doc = 'index'
templates_path = ['_templates']
exclude_patterns = ['_build', '_templates', '_data']
html_theme = 'furo'
html_title = f'torch-geometric-gate {release}'
html_static_path = []
pygments_style = 'sphinx'
pygments_dark_style = 'monokai'

# API pages: stubs come from `gate_sphinx.autosummary` (one per name in
# `__all__`).
autosummary_generate = False
autodoc_member_order = 'bysource'
autodoc_typehints = 'none'  # arguments are described in `Args:` (PyG style)
autodoc_inherit_docstrings = False
add_module_names = False
napoleon_custom_sections = ['Shapes']
napoleon_use_rtype = False

# Every reference must resolve (with `-W`, CI fails on one that does not),
# so that a mistyped name or a docstring that Napoleon misreads (an
# attribute's "text: more text" taken as a type) cannot render as plain
# text. Exempt: PyG's `:obj:` literals (`:obj:`None``, `:obj:`[N, H]``),
# Napoleon's "(callable, optional)", and other projects' objects, which
# `gate_sphinx.xref` links where it can and leaves as text where no
# inventory is at hand offline.
nitpicky = True
nitpick_ignore_regex = [
    ('py:obj', r'(?s).*'),
    ('py:class', r'optional|callable'),
    (
        r'py:\w+',
        r'(torch|torch_geometric|numpy|matplotlib|sklearn|ogb|os|threading'
        r'|contextlib|SparseTensor)(\..*)?',
    ),
]

# Doctest builder: runs the `testcode`/`doctest` directives of the narrative
# pages. Docstring examples are run by `pytest --doctest-modules`, with the
# globals of their module, so they are not collected a second time here.
doctest_test_doctest_blocks = ''
doctest_global_setup = """
import torch
from torch_geometric.typing import WITH_PYG_LIB, WITH_TORCH_SPARSE
"""
doctest_default_flags = (
    doctest.ELLIPSIS
    | doctest.NORMALIZE_WHITESPACE
    | doctest.DONT_ACCEPT_TRUE_FOR_1
)

# MyST renders CHANGELOG.md; its headings need no anchors.
myst_heading_anchors = 0

# Math: MathJax from its CDN unless a local copy is given.
if os.environ.get('GATE_DOCS_MATHJAX'):
    mathjax_path = os.environ['GATE_DOCS_MATHJAX']
    if '://' not in mathjax_path:
        mathjax_path = Path(mathjax_path).resolve().as_uri()

if os.environ.get('GATE_DOCS_INTERSPHINX') == '1':
    extensions.append('sphinx.ext.intersphinx')
    intersphinx_mapping = {
        'python': ('https://docs.python.org/3', None),
        'torch': ('https://docs.pytorch.org/docs/stable', None),
        'torch_geometric': (
            'https://pytorch-geometric.readthedocs.io/en/latest',
            None,
        ),
    }


def _public_bases(app, name, obj, options, bases):
    # 'Bases:' shows a private base of ours (the synthetic datasets' shared
    # `datasets._synthetic.SyntheticDataset`) as its own bases.
    i = 0
    while i < len(bases):
        parts = getattr(bases[i], '__module__', '').split('.')
        if parts[0] == 'torch_geometric_gate' and any(
            p.startswith('_') for p in parts
        ):
            bases[i : i + 1] = bases[i].__bases__
        else:
            i += 1


def setup(app):
    app.connect('autodoc-process-bases', _public_bases)
