r"""``benchmark/gpu_session.sh`` with ``DRY=1``: the GPU session's phases on
the CPU at tiny sizes (the Triton kernels under the interpreter). One phase
is made to fault and one to hang: both are recorded, the other phases'
results are kept, and $OUT holds at most 8 files."""

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
def test_dry_run_keeps_the_results_of_a_faulting_and_a_hung_phase(tmp_path):
    out = tmp_path / 'out'
    env = dict(os.environ, DRY='1', OUT=str(out), PATH=PATH,
               GATE_FAULT_PHASE='deep', GATE_HANG_PHASE='tests',
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
    assert 'rc=0' in phases['parity'], phases
    assert 'rc=124 (timed out)' in phases['tests']
    assert 'rc=139' in phases['deep']  # SIGSEGV
    assert (
        'rc=0' in phases['kernels-large'] and 'rc=0' in phases['kernels-small']
    )
    files = sorted(os.listdir(out))
    assert len(files) <= 8, files
    assert {
        'summary.txt',
        'env.txt',
        'results.tar.gz',
        'parity.md',
        'kernels-large.md',
        'kernels-small.md',
    } <= set(files)
    with tarfile.open(out / 'results.tar.gz') as tar:
        names = set(tar.getnames())
    for kept in (
        'parity/parity.csv',
        'kernels-large/kernels-large.csv',
        'kernels-small/kernels-small.csv',
        'deep/log.txt',
    ):
        assert f'./{kept}' in names, names
    # The largest graph first, the Triton kernels kept (parity passed):
    large = (out / 'kernels-large.md').read_text()
    assert large.index('products-size') < large.index('arxiv-size')
    assert '| triton | ok |' in large
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
