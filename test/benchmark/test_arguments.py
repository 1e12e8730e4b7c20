r"""The benchmark scripts' arguments: a value they cannot run with is a
one-line usage error naming the flag (exit code 2), before any work
(issue 50, defect 13: ``--edges 0`` ended in an AttributeError, ``--heads
0`` in a ZeroDivisionError, ``--channels -3`` in a torch error, and
``parity.py --dropout 1.5`` ran)."""

import pytest
from benchmark_testing import load_benchmark


def usage_error(capsys, main, argv):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    'argv, expected',
    [
        (['--edges', '0'], 'argument --edges: expected a whole number >= 1'),
        (['--edges', '1.5'], 'argument --edges: expected a whole number'),
        (['--heads', '0'], 'argument --heads: expected an integer >= 1'),
        (['--channels', '-3'], 'argument --channels: expected an integer'),
        (['--in-channels', '0'], 'argument --in-channels: expected an'),
        (
            ['--degree', '0'],
            'argument --degree: expected a finite number in (0.0, inf), '
            "got '0'",
        ),
        (['--dropout', '1.5'], 'argument --dropout: expected a number in'),
        (['--threads', '0'], 'argument --threads: expected an integer'),
        (
            ['--heads', '3', '--channels', '32'],
            'argument --channels: expected a multiple of every --heads '
            'value, got 32 for --heads 3',
        ),
    ],
)
def test_compiled_memory_bad_arguments_are_usage_errors(
    capsys, argv, expected
):
    main = load_benchmark('compiled_memory').main
    assert expected in usage_error(capsys, main, argv)


@pytest.mark.parametrize(
    'argv, expected',
    [
        (
            ['--dropout', '1.5'],
            "argument --dropout: expected a number in [0.0, 1.0], got '1.5'",
        ),  # fmt: skip
        (['--dropout', '-0.1'], 'argument --dropout: expected a number in'),
        (['--heads', '0'], 'argument --heads: expected an integer >= 1'),
        (['--edges', '0'], 'argument --edges: expected an integer >= 10'),
        (['--channels', '-3'], 'argument --channels: expected an integer'),
        (
            ['--power-law', '-1'],
            'argument --power-law: expected a finite number in [0.0, inf), '
            "got '-1'",
        ),
    ],
)
def test_parity_bad_arguments_are_usage_errors(capsys, argv, expected):
    parse_args = load_benchmark('parity').parse_args
    assert expected in usage_error(capsys, parse_args, argv)


@pytest.mark.parametrize(
    'argv, expected',
    [
        (
            ['--heads', '0'],
            "argument --heads: expected an integer >= 1, got '0'",
        ),
        (['--heads', '-1'], 'argument --heads: expected an integer >= 1'),
        (['--hidden', '0'], 'argument --hidden: expected an integer >= 1'),
        (
            ['--heads', '1', '4', '--hidden', '6'],
            'argument --hidden: expected a multiple of every --heads '
            'value, got 6 for --heads 4',
        ),
        (['--channels', '0'], 'argument --channels: expected an integer'),
        (['--top', '-1'], 'argument --top: expected an integer >= 0'),
        (
            ['--device', 'gpu'],
            "argument --device: expected 'cpu', 'cuda' or 'cuda:N' (N >= 0), "
            "got 'gpu'",
        ),
        (
            ['--device', 'cuda'],
            "argument --device: expected 'cpu' (no CUDA device is available "
            "here), got 'cuda'",
        ),
    ],
)
def test_host_ops_bad_arguments_are_usage_errors(
    capsys, monkeypatch, tmp_path, argv, expected
):
    # --heads 0 ended in a ZeroDivisionError, --heads -1 in a torch error,
    # --hidden 0 (or not a multiple of --heads) ran.
    import torch

    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    parse_args = load_benchmark('host_ops').parse_args
    argv = argv + ['--out', str(tmp_path)]
    assert expected in usage_error(capsys, parse_args, argv)


@pytest.mark.parametrize(
    'argv, expected',
    [
        (
            ['--scale', '0'],
            "argument --scale: expected a number in (0.0, 1.0], got '0'",
        ),
        (['--scale', '-1'], 'argument --scale: expected a number in (0.0,'),
        (['--scale', 'nan'], 'argument --scale: expected a number in (0.0,'),
        (['--scale', '2'], 'argument --scale: expected a number in (0.0,'),
        (
            ['--devices', 'cpu', 'gpu'],
            "argument --devices: expected 'cpu', 'cuda' or 'cuda:N' "
            "(N >= 0), got 'gpu'",
        ),
        (['--devices', 'cuda:x'], "argument --devices: expected 'cpu', 'cu"),
        (
            ['--devices', 'cpu', 'cuda'],
            "argument --devices: expected 'cpu' (no CUDA device is "
            "available here), got 'cuda'",
        ),
    ],
)
def test_kernels_bad_arguments_are_usage_errors(
    capsys, monkeypatch, tmp_path, argv, expected
):
    # --scale 0 or -1 timed a 2-node graph labelled arxiv-size, --scale nan
    # recorded "no graph"; --devices gpu ended in a RuntimeError, cuda
    # without CUDA in an AssertionError before anything was written.
    import torch

    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    main = load_benchmark('kernels').main
    argv = argv + ['--out', str(tmp_path)]
    assert expected in usage_error(capsys, main, argv)
    assert not list(tmp_path.iterdir())


def test_kernels_take_the_cuda_devices_there_are(
    capsys, monkeypatch, tmp_path
):
    import torch

    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 2)
    parse_args = load_benchmark('kernels').parse_args
    argv = ['--scale', '1e-3', '--out', str(tmp_path)]
    args = parse_args(argv + ['--devices', 'cpu', 'cuda', 'cuda:1'])
    assert args.devices == ['cpu', 'cuda', 'cuda:1']
    assert args.scale == 1e-3
    last = usage_error(capsys, parse_args, argv + ['--devices', 'cuda:2'])
    assert last.endswith(
        "error: argument --devices: expected 'cpu', 'cuda' or 'cuda:0' to "
        "'cuda:1' (2 CUDA device(s) here), got 'cuda:2'"
    )


@pytest.mark.parametrize(
    'script',
    ['deep', 'gpu_profile', 'triton_tune', 'triton_variants', 'turbo'],
)
@pytest.mark.parametrize('scale', ['0', '-1', 'nan', '1.5'])
def test_every_scale_is_a_fraction(capsys, script, scale):
    # A --scale outside (0, 1] timed a two-node graph under a sized
    # graph's name.
    module = load_benchmark(script)
    parse = getattr(module, 'parse_args', None) or module.main
    expected = (
        f"argument --scale: expected a number in (0.0, 1.0], got '{scale}'"
    )
    assert expected in usage_error(capsys, parse, ['--scale', scale])


@pytest.mark.parametrize('script', ['gpu_profile', 'triton_variants'])
def test_threads_are_torch_s_threads(tmp_path, script):
    # gpu_profile.py and triton_variants.py offered --threads and ran on
    # torch's default.
    import torch

    threads = torch.get_num_threads()
    parse_args = load_benchmark(script).parse_args
    try:
        parse_args(['--threads', '1', '--out', str(tmp_path)])
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)


def test_no_option_that_the_script_does_not_read(capsys, tmp_path):
    # triton_variants.py offered --channels (input features) and reads
    # none: its kernels take projections of --hidden.
    parse_args = load_benchmark('triton_variants').parse_args
    message = usage_error(
        capsys, parse_args, ['--channels', '1000', '--out', str(tmp_path)]
    )
    assert 'unrecognized arguments: --channels 1000' in message


def test_the_profile_s_wall_time_is_the_median_of_reps():
    # gpu_profile.py timed one step whatever --reps said.
    import torch

    calls = []
    got = load_benchmark('gpu_profile').profile_step(
        lambda: calls.append(torch.ones(1).sum()), torch.device('cpu'), 4
    )
    assert len(calls) == 4 + 1  # timed, then the profiled one
    assert got['wall_ms'] > 0


@pytest.mark.parametrize(
    'script, flag, more',
    [
        ('pair', '--devices', []),
        ('deep', '--devices', []),
        ('parity', '--device', []),
        ('gpu_profile', '--device', []),
        ('triton_variants', '--device', []),
        ('triton_tune', '--device', []),
        ('turbo', '--device', ['--compare', 'built']),
    ],
)
@pytest.mark.parametrize(
    'device, expected',
    [
        ('gpu', "expected 'cpu', 'cuda' or 'cuda:N' (N >= 0), got 'gpu'"),
        (
            'cuda:1',
            "expected 'cpu' (no CUDA device is available here), got 'cuda:1'",
        ),
    ],
)
def test_every_device_is_checked(
    capsys, monkeypatch, tmp_path, script, flag, more, device, expected
):
    # Only kernels.py and host_ops.py checked their devices: the others
    # ended in torch's RuntimeError on 'gpu' (after loading the graph) and
    # on 'cuda' without CUDA in a missing-library error or an
    # AssertionError, or recorded a row per configuration.
    import torch

    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    module = load_benchmark(script)
    parse = getattr(module, 'parse_args', None) or module.main
    argv = [flag, device, '--out', str(tmp_path), *more]
    last = usage_error(capsys, parse, argv)
    assert last.endswith(f'error: argument {flag}: {expected}')


@pytest.mark.parametrize(
    'argv, expected',
    [
        (['--heads', '0'], 'argument --heads: expected an integer >= 1, got'),
        (['--hidden', '0'], 'argument --hidden: expected an integer >= 1'),
        (['--channels', '0'], 'argument --channels: expected an integer'),
        (
            ['--heads', '3'],
            'argument --hidden: expected a multiple of every --heads value, '
            'got 64 for --heads 3',
        ),
        (['--graphs', 'random-0'], 'argument --graphs: expected random-N'),
        (['--reps', '0'], 'argument --reps: expected an integer >= 1, got'),
        (['--warmup', '-1'], 'argument --warmup: expected an integer >= 0'),
    ],
)
def test_triton_tune_bad_arguments_are_usage_errors(
    capsys, tmp_path, argv, expected
):
    # triton_tune.py took any integer: --heads 3 timed 63-wide layers under
    # --hidden 64, --heads 0 and --reps 0 ended in Python errors after the
    # graph was built, and --graphs took any name.
    parse_args = load_benchmark('triton_tune').parse_args
    argv = argv + ['--device', 'cpu', '--out', str(tmp_path)]
    assert expected in usage_error(capsys, parse_args, argv)


@pytest.mark.parametrize(
    'argv, expected',
    [
        (
            ['--shapes', '8x'],
            'argument --shapes: expected HxC, heads and channels each an '
            "integer >= 1 (e.g. 8x32), got '8x'",
        ),
        (['--shapes', '0x64'], 'argument --shapes: expected HxC'),
        (['--shapes', '8'], 'argument --shapes: expected HxC'),
        (['--reps', '0'], 'argument --reps: expected an integer >= 1, got'),
    ],
)
def test_turbo_bad_arguments_are_usage_errors(
    capsys, tmp_path, argv, expected
):
    # --shapes 8x ended in a ValueError after the graph was built, and
    # --reps 0 recorded a StatisticsError for every op.
    parse_args = load_benchmark('turbo').parse_args
    argv = argv + ['--compare', str(tmp_path), '--out', str(tmp_path)]
    assert expected in usage_error(capsys, parse_args, argv)


@pytest.mark.parametrize(
    'argv, expected',
    [
        (
            ['--nodes', '100'],
            'argument --isolated: expected fewer than --nodes (100), got 100',
        ),
        (
            ['--nodes', '600', '--isolated', '200'],
            'argument --input-loops: expected at most --nodes - --isolated '
            '(400), got 500',
        ),
    ],
)
def test_parity_graph_must_hold_its_isolated_nodes_and_loops(
    capsys, tmp_path, argv, expected
):
    # --nodes 100 (the default --isolated 100) ended in random_graph's
    # ValueError; --input-loops past the active nodes were cut to them while
    # the table's header gave the number asked for.
    parse_args = load_benchmark('parity').parse_args
    argv = argv + ['--device', 'cpu', '--out', str(tmp_path)]
    assert usage_error(capsys, parse_args, argv).endswith(expected)
    args = parse_args(['--nodes', '600', '--isolated', '100', '--out',
                       str(tmp_path)])  # fmt: skip
    assert (args.nodes, args.isolated, args.input_loops) == (600, 100, 500)


@pytest.mark.parametrize('cap', ['-1', 'nan', 'inf'])
def test_deep_cap_is_a_finite_size(capsys, tmp_path, cap):
    # --cap-gb -1 and nan ran every model without a cap (as 0 does), inf
    # recorded an OverflowError per model.
    parse_args = load_benchmark('deep').parse_args
    last = usage_error(
        capsys, parse_args, ['--cap-gb', cap, '--out', str(tmp_path)]
    )
    assert last.endswith(
        f'argument --cap-gb: expected a finite number in [0.0, inf), got '
        f"'{cap}'"
    )
    args = parse_args(['--cap-gb', '0', '--out', str(tmp_path)])
    assert args.cap_gb == 0.0


def test_the_profile_s_forward_is_every_forward_kernel():
    # Only gate_fwd_kernel counted: the one-head layout's forward and the
    # merge of split nodes were left out of the forward's time and rate.
    import importlib.util

    profile = load_benchmark('gpu_profile')
    if importlib.util.find_spec('triton') is not None:
        from torch_geometric_gate.ops.triton import _kernels

        assert set(profile.FORWARD_KERNELS) <= set(_kernels.__all__)
    per_kernel = {
        'gate_fwd_kernel_0d1d2d': (1, 1.0),
        'gate_fwd_1h_kernel': (1, 2.0),
        'gate_combine_kernel': (1, 4.0),
        'gate_bwd_combine_kernel': (1, 8.0),
        'gate_alpha_kernel': (1, 16.0),
        'void at::native::elementwise': (3, 32.0),
    }
    assert profile.forward_ms(per_kernel) == 7.0


@pytest.mark.parametrize(
    'script',
    ['chunk_sizes', 'contention', 'deep', 'gpu_profile', 'host_ops',
     'kernels', 'pair', 'parity', 'triton_variants', 'turbo'],
)  # fmt: skip
@pytest.mark.parametrize('name', ['', '.x', '../x', 'a/b'])
def test_every_name_is_a_file_name_stem(capsys, tmp_path, script, name):
    # --name '' wrote the results to the hidden files .csv and .md of
    # --out; '../x' wrote them outside --out.
    module = load_benchmark(script)
    parse = getattr(module, 'parse_args', None) or module.main
    last = usage_error(capsys, parse, ['--name', name, '--out', str(tmp_path)])
    assert last.endswith(
        'error: argument --name: expected a file name stem (not empty, '
        'without a folder, not starting with a dot, e.g. kernels-1), got '
        f'{name!r}'
    )
    assert list(tmp_path.iterdir()) == []
