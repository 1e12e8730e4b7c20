r"""Loads the scripts of ``benchmark/`` (not a package) for the tests."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_benchmark(name: str):
    r"""The module of ``benchmark/<name>.py``."""
    path = os.path.join(ROOT, 'benchmark', f'{name}.py')
    spec = importlib.util.spec_from_file_location(f'gate_bench_{name}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
