r"""``examples/distributed.py``: two processes under ``torchrun`` (gloo)
against one process, and its usage errors."""

import importlib.util
import os
import os.path as osp
import re
import subprocess
import sys

import pytest
import torch
from script_testing import run_in_one_interpreter, script
from torch_geometric.typing import WITH_PYG_LIB, WITH_TORCH_SPARSE

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SCRIPT = osp.join(ROOT, 'examples', 'distributed.py')
# Full neighbourhoods, so that one and two processes see the same batches:
SMALL = ['--num-nodes', '400', '--num-classes', '3', '--hidden-channels',
         '16', '--batch-size', '40', '--num-neighbors', '-1', '--epochs',
         '3', '--lr', '0.01']  # fmt: skip


def _env():
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    for key in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK'):
        env.pop(key, None)
    return env


def _run(*cmd):
    return subprocess.run(
        [*cmd], capture_output=True, text=True, env=_env(), timeout=600
    )


@pytest.fixture(scope='module')
def one_process(tmp_path_factory) -> dict:
    r"""The script's runs in one process (``python examples/distributed.py``)
    of the tests below, in one process forked from a warm interpreter: too
    few training nodes for a step, and the run that two processes must
    match (its parameters saved in ``1.pt``)."""
    save = tmp_path_factory.mktemp('distributed') / '1.pt'
    usage, one = run_in_one_interpreter(
        [
            script(SCRIPT, '--num-nodes', '100', '--epochs', '1'),
            script(SCRIPT, *SMALL, '--save', save),
        ],
        env=_env(),
    )
    return {'usage': usage, 'one': one, 'save': save}


@pytest.mark.slow
def test_no_step_in_an_epoch_is_a_usage_error(one_process):
    # It used to train nothing and then divide by zero steps.
    proc = one_process['usage']
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert (
        'argument --batch-size: 1024 is more than the 50 training nodes of '
        '--num-nodes 100, no step in an epoch'
    ) in proc.stderr
    assert 'Traceback' not in proc.stderr


@pytest.mark.slow
@pytest.mark.skipif(
    not (WITH_PYG_LIB or WITH_TORCH_SPARSE),
    reason="NeighborLoader's sampling needs pyg-lib or torch-sparse",
)
def test_two_processes_match_one_process(tmp_path, one_process):
    torchrun = [sys.executable, '-m', 'torch.distributed.run', '--standalone',
                '--nproc-per-node', '2']  # fmt: skip
    two = _run(*torchrun, SCRIPT, *SMALL, '--save', str(tmp_path / '2.pt'))
    assert two.returncode == 0, two.stdout[-2000:] + two.stderr[-3000:]
    one = one_process['one']
    assert one.returncode == 0, one.stderr[-3000:]
    assert '2 process(es) (gloo)' in two.stdout
    # 200 training nodes, global batch 40: 5 steps per epoch either way.
    assert '5 steps of 40 seeds per epoch' in two.stdout
    assert '5 steps of 40 seeds per epoch' in one.stdout

    def losses(stdout):
        return [float(v) for v in re.findall(r'Loss: ([\d.]+)', stdout)]

    two_losses = losses(two.stdout)
    assert len(two_losses) == 3
    assert two_losses == pytest.approx(losses(one.stdout), rel=1e-4)
    # It trains: the epoch's mean loss falls every epoch (15 small steps of
    # lr 0.01 take it from about ln 3 by a few percent, not more).
    assert all(b < a for a, b in zip(two_losses, two_losses[1:])), two_losses
    # The same parameters as one process on the same global batches, and
    # moved away from the (shared) initialisation:
    state2 = torch.load(tmp_path / '2.pt')
    state1 = torch.load(one_process['save'])
    for key in state1:
        assert torch.allclose(state2[key], state1[key], atol=1e-5), key
    assert any(v.abs().sum() > 0 for k, v in state2.items() if 'att' in k)


def test_arguments_are_checked(capsys):
    spec = importlib.util.spec_from_file_location('distributed', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # parses nothing: main() is not run
    args = module.parse_args(['--num-layers', '3', '--num-neighbors', '4'])
    assert args.num_neighbors == [4, 4, 4]
    for argv, message in (
        (['--num-layers', '3', '--num-neighbors', '1', '2'],
         'argument --num-neighbors: expected one value or one per layer '
         '(3), got 2'),
        (['--num-nodes', '5', '--num-classes', '6'],
         'argument --num-classes: expected at most --num-nodes'),
        (['--num-neighbors', '-2'],
         "argument --num-neighbors: expected an integer >= -1, got '-2'"),
    ):  # fmt: skip
        with pytest.raises(SystemExit) as e:
            module.parse_args(argv)
        assert e.value.code == 2
        assert capsys.readouterr().err.strip().endswith(message)


def test_save_is_checked_before_training(tmp_path, monkeypatch, capsys):
    # A --save into a missing folder failed in torch.save, after all the
    # training (a traceback); now it is a usage error first.
    spec = importlib.util.spec_from_file_location('distributed', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.delenv('RANK', raising=False)
    path = tmp_path / 'model.pt'
    assert module.parse_args(['--save', str(path)]).save == str(path)
    missing = tmp_path / 'missing'
    for argv, message in (
        (['--save', str(missing / 'model.pt')],
         f"argument --save: no folder '{missing}'"),
        (['--save', str(tmp_path)],
         f"argument --save: '{tmp_path}' is a folder"),
        # '' passed every check, and then nothing was saved:
        (['--save', ''], "argument --save: expected a file's path, got ''"),
    ):  # fmt: skip
        with pytest.raises(SystemExit) as e:
            module.parse_args(argv)
        assert e.value.code == 2
        assert capsys.readouterr().err.strip().endswith(message)
    assert not missing.exists()
    # The other ranks do not save: the folder may be on rank 0's machine only.
    monkeypatch.setenv('RANK', '1')
    assert module.parse_args(['--save', str(missing / 'model.pt')]).save


def test_the_scaling_page_claims_what_is_tested():
    # It said "tested bit for bit across ranks", but only rank 0 saves and
    # the test above compares it with one process up to a tolerance.
    with open(osp.join(ROOT, 'docs', 'source', 'scaling.rst')) as f:
        paragraph = next(
            p for p in f.read().split('\n\n') if 'DistributedDataParallel' in p
        )
    assert 'bit for bit' not in paragraph
    assert 'up to float rounding' in paragraph


def test_the_install_page_says_the_sampler_is_not_in_full():
    # The `full` extra was "everything the examples use", but this script
    # (and ogbn.py --loader neighbor) stops without pyg-lib or torch-sparse.
    with open(osp.join(ROOT, 'docs', 'source', 'install.rst')) as f:
        text = f.read()
    row = text[text.index('   * - ``full``') :].split('   * - ')[1]
    assert 'examples/distributed.py' in row and '``sparse``' in row, row
