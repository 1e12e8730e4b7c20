r"""Every script's ``--help`` as a user reads it (issue 46): plain text,
no Sphinx markup from the docstrings, and no ``(default: None)`` (an
argument without a default is either required or says what happens
without it); the examples', the paper's and the benchmark's scripts print
it without importing torch, PyG, pandas or matplotlib (seconds of imports
before the help)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from script_testing import module, run_in_one_interpreter, script

ROOT = Path(__file__).resolve().parent.parent
# Every example is a script (some, as PyG's, without a `__main__` guard);
# in benchmark/, the modules without one are the scripts' helpers:
SCRIPTS = sorted(
    p
    for folder in ('examples', 'benchmark')
    for p in (ROOT / folder).glob('*.py')
    if 'argparse' in p.read_text()
    and (folder == 'examples' or '__main__' in p.read_text())
)
MODULES = ['table1', 'table2', 'real_graphs', 'ogb']
EXAMPLES = sorted(p for p in SCRIPTS if p.parent.name == 'examples')
# The benchmark scripts that parse their arguments first (the others to
# follow):
BENCHMARKS = [
    ROOT / 'benchmark' / f'{name}.py'
    for name in ('chunk_sizes', 'contention', 'deep', 'gpu_profile',
                 'host_ops', 'kernels', 'pair', 'parity', 'plot', 'report')
]  # fmt: skip
HEAVY = ('torch', 'torch_geometric', 'pandas', 'matplotlib')
# Runs `python SCRIPT --help` (the script's folder first on the path, as
# Python puts it) or `python -m MODULE --help` as runpy does, then prints
# which of the packages named after it were imported.
IMPORTED = """
import contextlib, io, os, runpy, sys
kind, target, *packages = sys.argv[1:]
sys.argv = [target, '--help']
if kind == 'script':
    sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
try:
    with contextlib.redirect_stdout(io.StringIO()):
        if kind == 'module':
            runpy.run_module(target, run_name='__main__', alter_sys=True)
        else:
            runpy.run_path(target, run_name='__main__')
except SystemExit as stop:
    assert stop.code in (None, 0), stop.code
print(' '.join(m for m in packages if m in sys.modules))
"""
MARKUP = re.compile(r':(class|obj|func|meth|mod|math|data|attr):`|``')


@pytest.fixture(scope='module')
def helps():
    invocations = [script(p, '--help') for p in SCRIPTS] + [
        module(f'gate_paper.{m}', '--help') for m in MODULES
    ]
    results = run_in_one_interpreter(
        invocations, env=dict(os.environ, PYTHONPATH=str(ROOT))
    )
    names = [p.relative_to(ROOT).as_posix() for p in SCRIPTS] + MODULES
    return dict(zip(names, results))


def test_help_is_plain_text(helps):
    assert len(helps) >= 15
    for name, proc in helps.items():
        assert proc.returncode == 0, (name, proc.stderr[-2000:])
        assert proc.stdout.startswith('usage:'), name
        assert not MARKUP.search(proc.stdout), (name, proc.stdout)
        assert '(default: None)' not in proc.stdout, (name, proc.stdout)


@pytest.mark.parametrize(
    'kind, target',
    [('script', str(p)) for p in EXAMPLES + BENCHMARKS]
    + [('module', f'gate_paper.{m}') for m in MODULES],
    ids=[p.name for p in EXAMPLES + BENCHMARKS] + MODULES,
)
def test_help_imports_no_heavy_package(kind, target):
    # A new interpreter: what --help imports, nothing imported before.
    proc = subprocess.run(
        [sys.executable, '-c', IMPORTED, kind, target, *HEAVY],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == [], (
        f'{target} --help imports {proc.stdout.split()}: import them '
        'after parse_args, in the functions that use them'
    )


# The Triton and peer benchmarks (issue 47: public API only), apart from
# the list above:
TRITON_BENCHMARKS = [
    ROOT / 'benchmark' / f'{name}.py'
    for name in ('compiled_memory', 'triton_compile', 'triton_tune',
                 'triton_variants', 'turbo')
]  # fmt: skip


@pytest.mark.parametrize(
    'target', [str(p) for p in TRITON_BENCHMARKS],
    ids=[p.name for p in TRITON_BENCHMARKS],
)  # fmt: skip
def test_triton_benchmarks_help_imports_no_heavy_package(target):
    test_help_imports_no_heavy_package('script', target)
