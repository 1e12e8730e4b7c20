r"""``benchmark/triton_compile.py``: the registers and spills of the Triton
kernels from ``ptxas``, without a GPU (its compile check of every
kernel is in ``test/ops/test_triton_kernels_tiles.py``)."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
from benchmark_testing import load_benchmark

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


SCRIPT = os.path.join(ROOT, 'benchmark', 'triton_compile.py')


def _compiler_env(tmp_path):
    r"""The environment of a process that compiles (not interprets) the
    kernels; skips without Triton or its ptxas."""
    if importlib.util.find_spec('triton') is None:
        pytest.skip('Triton is not installed')
    if not load_benchmark('triton_compile').has_ptxas():
        pytest.skip('this Triton ships no ptxas (the wheels for x86 Linux do)')
    env = {k: v for k, v in os.environ.items() if k != 'TRITON_INTERPRET'}
    env['PYTHONPATH'] = ROOT + os.pathsep + env.get('PYTHONPATH', '')
    env['TRITON_CACHE_DIR'] = str(tmp_path / 'cache')
    return env


def test_register_report_lists_every_launched_kernel(tmp_path):
    env = _compiler_env(tmp_path)
    out = tmp_path / 'registers.md'
    script = SCRIPT
    subprocess.run(
        [sys.executable, script, '--heads', '2', '--channels', '8',
         '--dtypes', 'float32', '--arch', '90', '--warps', '2',
         '--out', str(out)],
        check=True, env=env, capture_output=True, timeout=900,
    )  # fmt: skip
    rows = [
        [c.strip() for c in line.strip('|').split('|')]
        for line in out.read_text().splitlines()
        if line.startswith('| 90 ')
    ]
    # The CSR, forward and backward (a hub split: the work lists and the
    # combine kernels) and alpha:
    assert {(r[1], r[2], r[4]) for r in rows} == {
        ('2', '8', k)
        for k in ('gate_csr_kernel', 'gate_rev_pos_kernel',
                  'gate_seg_count_kernel', 'gate_seg_node_kernel',
                  'gate_fwd_kernel', 'gate_combine_kernel',
                  'gate_alpha_kernel', 'gate_bwd_dst_kernel',
                  'gate_bwd_combine_kernel', 'gate_att_grad_kernel',
                  'gate_bwd_src_kernel', 'gate_bwd_src_combine_kernel')
    }  # fmt: skip
    # The passes take the switch's warps (--warps 2); the others Triton's 4:
    passes = ('gate_fwd_kernel', 'gate_bwd_dst_kernel', 'gate_bwd_src_kernel')
    for r in rows:
        assert r[6] == ('2' if r[4] in passes else '4'), r
        assert 0 < int(r[7]) <= 255  # registers per thread
        assert int(r[8]) >= 0 and int(r[9]) >= 0  # spill bytes


def test_a_construct_only_the_interpreter_runs_fails_to_compile(tmp_path):
    # A kernel calling a plain Python function runs under the interpreter
    # but not on a GPU: the compile check names the kernel and why.
    env = _compiler_env(tmp_path)
    (tmp_path / 'bad_kernels.py').write_text(
        textwrap.dedent(
            """
            import triton
            import triton.language as tl

            def plain(x):
                return x * 1.0

            @triton.jit
            def bad_kernel(x_ptr, N: tl.constexpr):
                i = tl.arange(0, N)
                tl.store(x_ptr + i, plain(tl.load(x_ptr + i)))
            """
        )
    )
    if os.environ.get('TRITON_INTERPRET') == '1':  # It runs there:
        import torch

        sys.path.insert(0, str(tmp_path))
        try:
            import bad_kernels
        finally:
            sys.path.remove(str(tmp_path))
        x = torch.arange(16.0)
        bad_kernels.bad_kernel[(1,)](x, 16)
        assert torch.equal(x, torch.arange(16.0))
    launch = dict(kernel='bad_kernel', signature={'x_ptr': '*fp32',
                  'N': 'constexpr'}, constants={'N': 16})  # fmt: skip
    code = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = [{str(tmp_path)!r}, {os.path.join(ROOT, 'test')!r}]
        from benchmark_testing import load_benchmark
        import bad_kernels
        load_benchmark('triton_compile').compile_launches(
            [{launch!r}], 90, kernels=bad_kernels)
        """
    )
    done = subprocess.run(
        [sys.executable, '-c', code], env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode != 0
    assert (
        "RuntimeError: bad_kernel with {'N': 16} does not compile for "
        'sm_90' in done.stderr
    ), done.stderr[-2000:]
    assert 'plain' in done.stderr


def test_launch_records_specialise_as_the_launcher_does():
    # Triton's launcher marks 16-byte aligned pointers and integers
    # divisible by 16 (`tt.divisibility`) and makes an integer equal to 1 a
    # constant, except for the arguments declared do_not_specialize (the
    # sizes: a new value must not compile a new variant; the dropout seed
    # is read from memory).
    if os.environ.get('TRITON_INTERPRET') != '1':
        pytest.skip('records launches under the interpreter')
    import torch

    from torch_geometric_gate.ops.triton import _kernels as kernels

    tc = load_benchmark('triton_compile')
    keep = torch.ones(64, 2, dtype=torch.int8)
    seed = torch.tensor([16])

    def record(buffer, num_edges):
        args = (buffer, num_edges, seed, 0.5, 2, 2, 16)
        return tc.launch_record(
            'gate_keep_kernel', kernels.gate_keep_kernel, args
        )

    aligned = record(keep, 32)
    assert aligned['attrs'] == {'keep_ptr': 'D', 'seed_ptr': 'D'}
    assert aligned['signature']['num_edges'] == 'i32'
    assert aligned['signature']['seed_ptr'] == '*i64'
    # Sizes of 1, 17 or 32 give the one variant:
    for num_edges in (1, 17, 32):
        assert record(keep, num_edges) == aligned
    # A pointer off the 16-byte alignment loses the hint:
    assert record(keep.view(-1)[1:], 32)['attrs'] == {'seed_ptr': 'D'}
    # The integer arguments of every kernel that vary per call or graph:
    # (a work list's offsets too):
    work = {'list_first', 'node_first', 'list_width'}
    fixed = {
        'gate_fwd_kernel': {'num_dst', *work},
        'gate_alpha_kernel': {'num_edges'},
        'gate_keep_kernel': {'num_edges'},
        'gate_bwd_dst_kernel': {'num_dst', 'num_segments', *work},
        'gate_bwd_combine_kernel': {'num_dst', 'gatt_first', *work},
        'gate_bwd_src_kernel': {'num_src', *work},
        'gate_att_grad_kernel': {'rows', 'width'},
    }
    for name, names in fixed.items():
        assert tc._do_not_specialize(getattr(kernels, name)) == names


def test_heads_and_channels_pair_up():
    done = subprocess.run(
        [sys.executable, SCRIPT,
         '--heads', '1', '8', '--channels', '64'],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert '--heads and --channels pair up' in done.stderr


def test_options_of_the_switch_record_the_variant_kernels():
    if os.environ.get('TRITON_INTERPRET') != '1':
        pytest.skip('records launches under the interpreter')
    tc = load_benchmark('triton_compile')
    options = dict(triton_one_head_layout=True, triton_backward_record=True)
    launches = tc.record_launches(
        [(1, 4, 'float32', None, 0.0)], options=options
    )
    names = {r['kernel'] for r in launches}
    assert {'gate_fwd_1h_kernel', 'gate_bwd_dst_1h_kernel',
            'gate_bwd_src_1h_kernel'} <= names  # fmt: skip
    assert not {'gate_fwd_kernel', 'gate_bwd_dst_kernel',
                'gate_bwd_src_kernel', 'gate_bwd_dst_rec_kernel',
                'gate_bwd_src_rec_kernel'} & names  # fmt: skip
    # The one-head backward's passes with the record (a constexpr flag):
    flags = {(r['kernel'], k) for r in launches
             for k, v in r['constants'].items()
             if k.endswith('_RECORD') and v is True}  # fmt: skip
    assert flags == {('gate_bwd_dst_1h_kernel', 'WRITE_RECORD'),
                     ('gate_bwd_src_1h_kernel', 'READ_RECORD')}  # fmt: skip
    # The warps the launches give (the one-head layout's 2), compiled so:
    warps = {r['kernel']: r.get('num_warps') for r in launches}
    for name in ('gate_fwd_1h_kernel', 'gate_bwd_dst_1h_kernel',
                 'gate_bwd_src_1h_kernel'):  # fmt: skip
        assert warps[name] == 2, warps
    assert warps['gate_csr_kernel'] is None  # Triton's default


def test_a_bad_option_is_a_usage_error():
    done = subprocess.run(
        [sys.executable, SCRIPT, '--warps', '3'],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().endswith(
        "error: Expected 'triton_warps' to be a power of two up to 32 (got 3)"
    )


@pytest.mark.parametrize(
    'argv, expected',
    [
        (['--heads', '0'], 'argument --heads: expected an integer >= 1, got'),
        (
            ['--channels', '1', '-8'],
            "argument --channels: expected an integer >= 1, got '-8'",
        ),
        (['--out', 'FILE/table.md'], 'argument --out: expected a folder, got'),
        (['--out', 'TMP'], 'argument --out: expected a markdown file, got'),
    ],
)
def test_bad_shapes_and_outputs_are_usage_errors(tmp_path, argv, expected):
    # --heads 0 ended in the recording process's ValueError and a
    # CalledProcessError; an --out in a folder that cannot be made failed
    # with a FileNotFoundError after every kernel was compiled.
    (tmp_path / 'file').write_text('')
    argv = [
        a.replace('FILE', str(tmp_path / 'file')).replace('TMP', str(tmp_path))
        for a in argv
    ]
    done = subprocess.run(
        [sys.executable, SCRIPT, '--heads', '1', '--channels', '8', *argv],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert expected in done.stderr.strip().splitlines()[-1]
