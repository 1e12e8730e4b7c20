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
        (['--degree', '0'], 'argument --degree: expected a number in (0'),
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
        (['--power-law', '-1'], 'argument --power-law: expected a number'),
    ],
)
def test_parity_bad_arguments_are_usage_errors(capsys, argv, expected):
    parse_args = load_benchmark('parity').parse_args
    assert expected in usage_error(capsys, parse_args, argv)
