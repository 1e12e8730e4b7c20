r"""``benchmark/gpu_session.sh`` with ``DRY=1``: the GPU session's phases on
the CPU at tiny sizes (the Triton kernels under the interpreter, turbo-gnn
not built: no CUDA). Phases are made to fault and one to hang: all are
recorded, the other phases' results are kept, and $OUT holds its 4 files.
A faulting parity check leaves the Triton timings out (``parity.py`` has
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
               GATE_FAULT_PHASE='parity host-ops', GATE_HANG_PHASE='tests',
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
    # Without Triton (the parity check failed) the timing tables are left
    # out; the phases that do not time the layer's kernels run:
    for name in ('variants', 'kernels', 'kernels-products'):
        assert name not in phases, phases
    assert 'rc=139' in phases['host-ops']
    for name in ('profile', 'turbo'):
        assert 'rc=0' in phases[name], phases
    # turbo-gnn's build (in the background) fails at once without CUDA, a
    # result; its phase records why turbo-gnn did not run:
    assert 'turbo-build' in phases
    assert sorted(os.listdir(out)) == [
        'env.txt', 'results.tar.gz', 'summary.txt', 'tables.md',
    ]  # fmt: skip
    with tarfile.open(out / 'results.tar.gz') as tar:
        names = set(tar.getnames())
    for kept in ('parity/log.txt', 'host-ops/log.txt', 'profile/profile.csv',
                 'profile/profile-kernels.csv', 'turbo/turbo.csv',
                 'turbo-build/log.txt'):  # fmt: skip
        assert f'./{kept}' in names, names
    tables = (out / 'tables.md').read_text()
    # The phases' tables in the order they ran, each naming its commit:
    order = [tables.index(f'<!-- {name}: ') for name in
             ('profile', 'turbo')]  # fmt: skip
    assert order == sorted(order)
    assert tables.count('commit: ') >= 2
    assert '| GATE | triton | ok |' in tables  # the profile's step
    assert 'turbo-gnn needs CUDA (not run)' in tables
    assert '| gate-shared | ok |' in tables
    env_text = (out / 'env.txt').read_text()
    assert 'torch.version.cuda' in env_text and 'nvcc' in env_text


@pytest.mark.slow
def test_dry_run_times_triton_against_gatv2_and_the_inputs(tmp_path):
    out = tmp_path / 'out'
    env = dict(os.environ, DRY='1', OUT=str(out), PATH=PATH,
               GATE_FAULT_PHASE='tests host-ops profile turbo')  # fmt: skip
    proc = subprocess.run(
        ['bash', SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    phases = summary(out)
    for name in ('parity', 'variants', 'kernels', 'kernels-floor',
                 'kernels-products'):  # fmt: skip
        assert 'rc=0' in phases[name], phases
    tables = (out / 'tables.md').read_text()
    variants = tables[tables.index('<!-- variants: ') :]
    for variant in ('| 1h nodes=4 warps=2 | ok |', '| E x H | ok |',
                    '| record | ok |'):  # fmt: skip
        assert variant in variants
    section = tables[tables.index('<!-- kernels-products: ') :]
    assert '| plain |' in section and '| edge-index |' in section
    floor = tables[tables.index('<!-- kernels-floor: ') :]
    assert '| GATE | triton | ok |' in floor
    assert '| GATv2 | eager | ok |' in floor


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
