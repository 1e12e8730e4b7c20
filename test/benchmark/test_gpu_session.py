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
import torch
from benchmark_testing import ROOT

SCRIPT = os.path.join(ROOT, 'benchmark', 'gpu_session.sh')
# The script runs `python3`: this interpreter's.
PATH = os.path.dirname(sys.executable) + os.pathsep + os.environ['PATH']


def summary(out) -> dict:
    lines = (out / 'summary.txt').read_text().splitlines()
    return {line.split(':')[0]: line for line in lines}


def run_dry(out, **hooks):
    env = dict(os.environ, DRY='1', OUT=str(out), PATH=PATH, **hooks)
    proc = subprocess.run(
        ['bash', SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=1000,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return summary(out)


@pytest.mark.slow
def test_dry_run_times_triton_and_keeps_what_faulting_phases_leave(tmp_path):
    # Every phase runs but `host-ops` (made to fault) and `tests` (made to
    # hang until its limit): the others' results are kept.
    out = tmp_path / 'out'
    phases = run_dry(out, GATE_FAULT_PHASE='host-ops',
                     GATE_HANG_PHASE='tests', LIMIT_tests='1')  # fmt: skip
    assert 'rc=124 (timed out)' in phases['tests']
    assert 'rc=139' in phases['host-ops']  # SIGSEGV
    for name in ('parity', 'profile', 'variants', 'kernels', 'kernels-floor',
                 'turbo', 'kernels-products', 'deep',
                 'cuda-graphs'):  # fmt: skip
        assert 'rc=0' in phases[name], phases
    assert 'Triton left out' not in phases
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
                 'turbo-build/log.txt', 'kernels/kernels.csv',
                 'deep/deep.csv', 'cuda-graphs/tests.log'):  # fmt: skip
        assert f'./{kept}' in names, names
    tables = (out / 'tables.md').read_text()
    # The phases' tables in the order they ran, each naming its commit:
    order = [tables.index(f'<!-- {name}: ') for name in
             ('parity', 'profile', 'variants', 'kernels', 'kernels-floor',
              'turbo', 'kernels-products', 'deep', 'cuda-graphs')]  # fmt: skip
    assert order == sorted(order)
    assert tables.count('commit: ') >= len(order)
    profile = tables[tables.index('<!-- profile: ') :]
    assert '| GATE | triton | ok |' in profile  # the profile's step
    assert 'turbo-gnn needs CUDA (not run)' in tables
    assert '| gate-shared | ok |' in tables
    variants = tables[tables.index('<!-- variants: ') :]
    for variant in ('| forward | 1h nodes=4 warps=2 | ok |',
                    '| backward | 1h nodes=4 warps=2 | ok |',
                    '| backward | 1h record nodes=4 warps=4 | ok |',
                    '| E x H | ok |', '| record | ok |'):  # fmt: skip
        assert variant in variants
    section = tables[tables.index('<!-- kernels-products: ') :]
    assert '| plain |' in section and '| edge-index |' in section
    graphs = tables[tables.index('<!-- cuda-graphs: ') :]
    assert '# Tests: pytest test/ops/test_cuda_graphs.py' in graphs
    assert '- commit: ' in graphs and 'skipped' in graphs  # no CUDA
    floor = tables[tables.index('<!-- kernels-floor: ') :]
    assert '| GATE | triton | ok |' in floor
    assert '| GATv2 | eager | ok |' in floor
    env_text = (out / 'env.txt').read_text()
    assert 'torch.version.cuda' in env_text and 'nvcc' in env_text


@pytest.mark.slow
def test_dry_run_leaves_triton_out_when_parity_fails(tmp_path):
    # A faulting parity check leaves the phases that time the layer's
    # kernels out (the others made to fault too, to keep this short).
    out = tmp_path / 'out'
    phases = run_dry(out, GATE_FAULT_PHASE='parity tests host-ops profile '
                     'turbo')  # fmt: skip
    assert 'rc=139' in phases['parity'], phases
    assert 'Triton left out' in phases
    for name in ('variants', 'kernels', 'kernels-floor', 'kernels-products',
                 'deep'):  # fmt: skip
        assert name not in phases, phases
    for name in ('tests', 'host-ops', 'profile', 'turbo'):
        assert 'rc=139' in phases[name], phases
    assert 'rc=0' in phases['cuda-graphs']  # skipped: no CUDA
    with tarfile.open(out / 'results.tar.gz') as tar:
        assert './parity/log.txt' in tar.getnames()


def limit(line: str) -> int:  # "name: rc=0 (12 s of 45)" -> 45
    return int(line.rsplit(' of ', 1)[1].rstrip(')'))


@pytest.mark.slow
def test_dry_run_shares_the_time_left_so_a_slow_phase_starves_none(tmp_path):
    # 120 s in all: `kernels` (weight 120 s) hangs; it gets its share of
    # what is left, not all of it, and every phase after it still runs
    # (made to fault, to keep this short), within the total.
    out = tmp_path / 'out'
    after = ['kernels-floor', 'turbo', 'kernels-products', 'deep',
             'cuda-graphs']  # fmt: skip
    phases = run_dry(out, TOTAL_SECONDS='120', GATE_HANG_PHASE='kernels',
                     GATE_FAULT_PHASE=' '.join(['tests', 'host-ops',
                                                'profile', 'variants',
                                                *after]))  # fmt: skip
    assert 'rc=0' in phases['parity'], phases
    assert 'rc=124 (timed out)' in phases['kernels'], phases
    # Its share of the ~85 s left then, not all of them (under 35 s):
    assert limit(phases['kernels']) < 60
    for name in after:
        assert 'rc=139' in phases[name], phases
    total = int(phases['total'].split()[1])
    assert total <= 120


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


def test_an_out_that_is_no_folder_is_a_usage_error(tmp_path):
    # OUT naming a file ran every phase (on a GPU machine, its whole
    # time) and wrote nothing, with exit code 0.
    out = tmp_path / 'file'
    out.write_text('')
    proc = subprocess.run(
        ['bash', SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, DRY='1', OUT=str(out), PATH=PATH),
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"OUT: expected a writable folder, got '{out}'"
    )
    assert proc.stdout == ''  # No phase ran.


@pytest.mark.skipif(torch.cuda.is_available(), reason='needs no CUDA device')
def test_without_a_cuda_device_it_stops_after_the_environment(tmp_path):
    # Where torch sees no GPU (a driver older than its CUDA build), every
    # phase ran on the CPU or failed, spending the lent machine's time.
    env = dict(os.environ, OUT=str(tmp_path), PATH=PATH)
    env.pop('DRY', None)
    proc = subprocess.run(
        ['bash', SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert sorted(summary(tmp_path)) == ['env', 'no CUDA device']
    assert 'no phase ran' in (tmp_path / 'summary.txt').read_text()
    assert (tmp_path / 'env.txt').stat().st_size > 0


def test_dry_run_of_the_tune_part_runs_on_the_cpu(tmp_path):
    # The tune part gave triton_tune.py no DRY sizes nor device: DRY=1 ran
    # it on CUDA at random-1e6 and arxiv-size, which failed at once.
    out = tmp_path / 'out'
    env = dict(os.environ, DRY='1', OUT=str(out), PATH=PATH)
    proc = subprocess.run(
        ['bash', SCRIPT, 'tune'], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'rc=0' in summary(out)['tune'], summary(out)
    with tarfile.open(out / 'results.tar.gz') as tar:
        table = tar.extractfile('./tune/triton_tune.csv').read().decode()
    assert table.splitlines()[1].startswith('cpu,random-100,')


def test_a_pack_that_tar_warns_about_still_replaces_the_last(tmp_path):
    # GNU tar exits 1 when a file changed as it read it, as the turbo-gnn
    # build's log does (written in the background during the phases): the
    # archive was whole, but every phase's results were dropped from
    # $OUT/results.tar.gz until a pack found no file changing. A tar that
    # archives and exits 1:
    import shutil

    fake = tmp_path / 'bin'
    fake.mkdir()
    (fake / 'tar').write_text(
        f'#!/bin/sh\n{shutil.which("tar")} "$@" || exit $?\n'
        'echo "tar: ./turbo-build/log.txt: file changed as we read it" >&2\n'
        'exit 1\n'
    )
    (fake / 'tar').chmod(0o755)
    out = tmp_path / 'out'
    env = dict(os.environ, DRY='1', OUT=str(out), LIMIT_tune='1',
               PATH=f'{fake}{os.pathsep}{PATH}')  # fmt: skip
    proc = subprocess.run(
        ['bash', SCRIPT, 'tune'], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'file changed as we read it' in proc.stderr
    with tarfile.open(out / 'results.tar.gz') as tar:
        assert './tune/log.txt' in tar.getnames()


@pytest.mark.parametrize(
    'name, value',
    [('TOTAL_SECONDS', 'abc'), ('TOTAL_SECONDS', '-5'),
     ('TOTAL_SECONDS', '08'), ('TOTAL_SECONDS', '0'), ('LIMIT_tune', '9m')],
)  # fmt: skip
def test_a_time_that_is_no_whole_seconds_is_a_usage_error(
    tmp_path, name, value
):
    # TOTAL_SECONDS=abc ended in 'abc: unbound variable', '08' in a bash
    # arithmetic error after env.txt, '-5' and '0' skipped every phase and
    # exited 0; LIMIT_<phase>=9m ended in 'integer expression expected'.
    out = tmp_path / 'out'
    env = dict(os.environ, DRY='1', OUT=str(out), PATH=PATH, **{name: value})
    proc = subprocess.run(
        ['bash', SCRIPT, 'tune'], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr == (
        f"{name}: expected whole seconds >= 1, got '{value}'\n"
    )
    assert not out.exists() or os.listdir(out) == []
