import importlib.util
import os
import os.path as osp
import re
import subprocess
import sys

import pytest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
EXAMPLES = osp.join(ROOT, 'examples')


def load_script(name, monkeypatch):
    spec = importlib.util.spec_from_file_location(
        f'gate_example_{name}', osp.join(EXAMPLES, f'{name}.py')
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BAD = [
    ('quickstart', ['--num-layers', '0'], '--num-layers', 'integer >= 1'),
    ('quickstart', ['--epochs', '0'], '--epochs', 'integer >= 1'),
    ('quickstart', ['--hidden', '-5'], '--hidden', 'integer >= 1'),
    ('quickstart', ['--edge-prob', '1.5'], '--edge-prob', r'\[0.0, 1.0\]'),
    ('quickstart', ['--lr', '0'], '--lr', r'finite number in \(0.0, inf\)'),
    # Not "in (0.0, inf]", which said that inf was allowed:
    ('quickstart', ['--lr', 'inf'], '--lr', r"\(0.0, inf\), got 'inf'$"),
    ('quickstart', ['--num-classes', '1'], '--num-classes', '>= 2'),
    ('quickstart', ['--num-nodes', '5'], '--num-classes', 'at most'),
    ('quickstart', ['--seed', '-1'], '--seed', '>= 0'),
    ('distributed', ['--num-nodes', '0'], '--num-nodes', '>= 4'),
    # 2 nodes have no test node: 'Test accuracy: nan' after the training:
    ('distributed', ['--num-nodes', '2'], '--num-nodes', 'integer >= 4'),
    ('distributed', ['--num-classes', '0'], '--num-classes', '>= 2'),
    ('distributed', ['--epochs', '0'], '--epochs', '>= 1'),
    ('distributed', ['--lr', 'inf'], '--lr', r"\(0.0, inf\), got 'inf'$"),
    # A 2:1:1 split of 2 nodes had no test node (accuracy NaN):
    ('quickstart', ['--num-nodes', '3'], '--num-nodes', 'integer >= 4'),
    # Past torch.manual_seed's range (a traceback, not a usage error):
    ('quickstart', ['--seed', str(2**64)], '--seed', f'< {2**64}, got'),
    ('distributed', ['--seed', str(2**64)], '--seed', f'< {2**64}, got'),
    ('heterophilous', ['--seed', str(2**64)], '--seed', f'< {2**64}, got'),
    # Accepted, then a raw traceback from scikit-learn on NaN scores:
    ('heterophilous', ['--lr', 'inf'], '--lr', "finite number > 0, got 'inf'"),
]


@pytest.mark.parametrize('script, argv, flag, expected', BAD)
def test_bad_flag_is_a_usage_error(
    monkeypatch, capsys, script, argv, flag, expected
):
    module = load_script(script, monkeypatch)
    with pytest.raises(SystemExit) as e:
        module.parse_args(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith('usage:')
    last = err.strip().splitlines()[-1]
    assert f'argument {flag}' in last
    assert re.search(expected, last), last


def test_good_flags_parse(monkeypatch):
    args = load_script('quickstart', monkeypatch).parse_args(['--seed', '3'])
    assert args.seed == 3


def test_bad_flag_exits_2_from_the_command_line():
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run(
        [sys.executable, osp.join(EXAMPLES, 'quickstart.py'), '--epochs', '0'],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        'quickstart.py: error: argument --epochs: expected an integer >= 1, '
        "got '0'"
    )
