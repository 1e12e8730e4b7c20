r"""Loads the scripts of ``benchmark/`` (not a package) for the tests."""

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARK = os.path.join(ROOT, 'benchmark')


SHARED = (
    'cli', 'common', 'report', 'plotting', 'fresh_process', 'op_counter',
)  # fmt: skip


def load_benchmark(name: str):
    r"""The module of ``benchmark/<name>.py``. The scripts import their
    shared modules (those of :data:`SHARED`) under those names, as they do
    when run (Python puts a script's folder first on its path), and so does
    a process they spawn: the folder goes on :obj:`sys.path` here."""
    if BENCHMARK not in sys.path:
        sys.path.insert(0, BENCHMARK)
    if name in SHARED:  # Under its own name, as the scripts import it.
        return importlib.import_module(name)
    path = os.path.join(BENCHMARK, f'{name}.py')
    spec = importlib.util.spec_from_file_location(f'gate_bench_{name}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
