"""The documentation's Sphinx extensions (not part of the wheel).

``autosummary`` writes one API stub per name in ``__all__``; ``results``
shows tables of the committed benchmark results from their CSV files;
``xref`` links PyTorch, PyG and Python names offline.
``docs/source/conf.py`` loads them as ``gate_sphinx.<name>``; they import
from the repository after ``pip install -e ".[docs]"``.
"""
