r"""The reproduction of the GATE paper (Mustafa & Burkholz, ICML 2024):
its training loop, models, data, run store, runner and tables, and one
script per table (``python -m gate_paper.table1`` etc.).

Not part of the ``torch-geometric-gate`` wheel: it installs from the
repository with ``pip install -e ".[paper]"``. See ``gate_paper/README.md``.
"""
