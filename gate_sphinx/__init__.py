"""The documentation's two Sphinx extensions (not part of the wheel).

``autosummary`` writes one API stub per name in ``__all__``; ``xref`` links
PyTorch, PyG and Python names offline. ``docs/source/conf.py`` loads them as
``gate_sphinx.autosummary`` and ``gate_sphinx.xref``; they import from the
repository after ``pip install -e ".[docs]"``.
"""
