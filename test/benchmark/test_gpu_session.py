r"""``benchmark/gpu_session.sh`` with ``DRY=1``: the GPU session's phases on
the CPU at tiny sizes (the Triton kernels under the interpreter). Two
phases are made to fault and one to hang: all are recorded, the other
phases' results are kept, and $OUT holds at most 8 files. A faulting
parity check leaves Triton out of the phases after it (``parity.py`` has
its own test)."""

import os
import subprocess
import sys
import tarfile

import pytest
from benchmark_testing import ROOT

SCRIPT = os.path.join(ROOT, 'benchmark', 'gpu_session.sh')
# The script runs `python3`: this interpreter's.
PATH = os.path.dirname(sys.executable) + os.pathsep + os.environ['PATH']


def summary(out) -> dict:
    lines = (out / 'summary.txt').read_text().splitlines()
    return {line.split(':')[0]: line for line in lines}


@pytest.mark.slow
def test_dry_run_keeps_the_results_of_faulting_and_hung_phases(tmp_path):
    out = tmp_path / 'out'
    env = dict(os.environ, DRY='1', OUT=str(out), PATH=PATH,
               GATE_FAULT_PHASE='parity deep', GATE_HANG_PHASE='tests',
               LIMIT_tests='1')  # fmt: skip
    proc = subprocess.run(
        ['bash', SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]  # fmt: skip
    phases = summary(out)
    assert 'rc=139' in phases['parity'], phases  # SIGSEGV
    assert 'Triton left out' in phases
    assert 'rc=124 (timed out)' in phases['tests']
    assert 'rc=139' in phases['deep']
    assert (
        'rc=0' in phases['kernels-large'] and 'rc=0' in phases['kernels-small']
    )
    files = sorted(os.listdir(out))
    assert len(files) <= 8, files
    assert {
        'summary.txt',
        'env.txt',
        'results.tar.gz',
        'kernels-large.md',
        'kernels-small.md',
    } <= set(files)
    with tarfile.open(out / 'results.tar.gz') as tar:
        names = set(tar.getnames())
    for kept in (
        'parity/log.txt',
        'kernels-large/kernels-large.csv',
        'kernels-small/kernels-small.csv',
        'deep/log.txt',
    ):
        assert f'./{kept}' in names, names
    # The largest graph first, the Triton kernels left out:
    large = (out / 'kernels-large.md').read_text()
    assert large.index('products-size') < large.index('arxiv-size')
    assert '| chunked | ok |' in large and '| triton |' not in large
    env_text = (out / 'env.txt').read_text()
    assert 'torch.version.cuda' in env_text and 'nvcc' in env_text


def test_an_unknown_part_is_a_usage_error(tmp_path):
    proc = subprocess.run(
        ['bash', SCRIPT, 'bench'],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, OUT=str(tmp_path)),
    )
    assert proc.returncode == 2  # fmt: skip
    assert "unknown part 'bench'" in proc.stderr
