r"""The README's Python code pastes and runs as shown.

Each ```` ```python ```` block of ``README.md`` is pasted line by line into
a fresh interactive interpreter (:class:`code.InteractiveConsole`, as a
paste into ``python`` reads it: a wrapped line fails there), and prints
what the ```` ```text ```` block right after it shows, where there is one.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r'```(\w*)\n(.*?)```\n', re.S)
# Runs stdin in a console that stops at the first error, with its traceback.
PASTE = r"""
import code, sys

class Console(code.InteractiveConsole):
    def showsyntaxerror(self, filename=None, **kwargs):
        raise

    def showtraceback(self):
        raise

console = Console()
for line in sys.stdin.read().splitlines():
    console.push(line)
if console.push(''):
    sys.exit('the paste ends inside an unfinished statement')
"""


def python_blocks(text):
    r"""``(code, expected output or None)`` of every ```` ```python ````
    block of :obj:`text`."""
    fences = list(FENCE.finditer(text))
    out = []
    for fence, after in zip(fences, fences[1:] + [None]):
        if fence.group(1) != 'python':
            continue
        expected = None
        if (
            after is not None
            and after.group(1) == 'text'
            and not text[fence.end() : after.start()].strip()
        ):
            expected = after.group(2)
        out.append((fence.group(2), expected))
    return out


def paste(code, tmp_path):
    return subprocess.run(
        [sys.executable, '-c', PASTE],
        input=code,
        capture_output=True,
        text=True,
        cwd=tmp_path,  # a user's folder, not the checkout
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=600,
    )


BLOCKS = python_blocks((ROOT / 'README.md').read_text())


def test_readme_has_python_blocks_with_their_output():
    assert len(BLOCKS) >= 2
    assert any(expected is not None for _, expected in BLOCKS)


@pytest.mark.parametrize(
    'code, expected', BLOCKS, ids=[f'block{i}' for i in range(len(BLOCKS))]
)
def test_readme_python_block_runs_as_shown(code, expected, tmp_path):
    proc = paste(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    if expected is not None:
        assert proc.stdout == expected


def test_a_wrapped_line_fails(tmp_path):
    # The parameter count as the README once had it, a one-liner wrapped:
    # its continuation line is an unexpected indent.
    proc = paste('import os;\n  import sys\n', tmp_path)
    assert proc.returncode != 0
    assert 'IndentationError' in proc.stderr
    assert proc.stdout == ''


def test_python_blocks_pairs_a_block_with_the_text_right_after_it():
    text = (
        '```python\nprint(1)\n```\n\n```text\n1\n```\n'
        '```python\nx = 1\n```\nprose\n```text\nnot its output\n```\n'
    )
    assert python_blocks(text) == [('print(1)\n', '1\n'), ('x = 1\n', None)]
