r"""Every script's ``--help`` as a user reads it (issue 46): plain text,
no Sphinx markup from the docstrings, and no ``(default: None)`` (an
argument without a default is either required or says what happens
without it)."""

import os
import re
from pathlib import Path

import pytest
from script_testing import module, run_in_one_interpreter, script

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(
    p
    for folder in ('examples', 'benchmark')
    for p in (ROOT / folder).glob('*.py')
    if 'argparse' in p.read_text() and '__main__' in p.read_text()
)
MODULES = ['table1', 'table2', 'real_graphs', 'ogb']
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
