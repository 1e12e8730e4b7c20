r"""``benchmark/triton_compile.py``: the registers and spills of the Triton
kernels from ``ptxas``, without a GPU (its compile check is in
``test/ops/test_triton.py``)."""

import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def test_register_report_lists_every_launched_kernel(tmp_path):
    if importlib.util.find_spec('triton') is None:
        pytest.skip('Triton is not installed')
    import triton

    bin_dir = os.path.join(
        os.path.dirname(triton.__file__), 'backends', 'nvidia', 'bin'
    )
    if not os.path.isfile(os.path.join(bin_dir, 'ptxas')):
        pytest.skip('this Triton ships no ptxas (the wheels for x86 Linux do)')
    out = tmp_path / 'registers.md'
    env = {k: v for k, v in os.environ.items() if k != 'TRITON_INTERPRET'}
    env['PYTHONPATH'] = ROOT + os.pathsep + env.get('PYTHONPATH', '')
    env['TRITON_CACHE_DIR'] = str(tmp_path / 'cache')
    script = os.path.join(ROOT, 'benchmark', 'triton_compile.py')
    subprocess.run(
        [sys.executable, script, '--heads', '1', '2', '--channels', '4',
         '8', '--dtypes', 'float32', '--arch', '90', '--out', str(out)],
        check=True, env=env, capture_output=True, timeout=900,
    )  # fmt: skip
    rows = [
        [c.strip() for c in line.strip('|').split('|')]
        for line in out.read_text().splitlines()
        if line.startswith('| 90 ')
    ]
    # Forward, alpha and the two backward kernels, per configuration:
    assert sorted((r[1], r[2], r[4]) for r in rows) == sorted(
        (h, c, k)
        for h, c in (('1', '4'), ('2', '8'))
        for k in ('gate_fwd_kernel', 'gate_alpha_kernel',
                  'gate_bwd_dst_kernel', 'gate_bwd_src_kernel')
    )  # fmt: skip
    for r in rows:
        assert 0 < int(r[7]) <= 255  # registers per thread
        assert int(r[8]) >= 0 and int(r[9]) >= 0  # spill bytes


def test_heads_and_channels_pair_up():
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'benchmark', 'triton_compile.py'),
         '--heads', '1', '8', '--channels', '64'],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert '--heads and --channels pair up' in done.stderr
