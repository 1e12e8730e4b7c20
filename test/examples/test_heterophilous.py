r"""``examples/heterophilous.py``: GATE against GATv2 on Minesweeper from a
copy of the offline data in ``../shared/data/heterophilous``."""

import importlib.util
import os
import os.path as osp
import re
import shutil

import pytest
from script_testing import run_in_one_interpreter, script

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SCRIPT = osp.join(ROOT, 'examples', 'heterophilous.py')
SHARED = osp.join(ROOT, '..', 'shared', 'data', 'heterophilous')
SMALL = ['--epochs', '3', '--num-layers', '2', '--hidden-channels', '8']


def _run(*argv):
    (result,) = run_in_one_interpreter(
        [script(SCRIPT, *argv)],
        env=dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1'),
    )
    return result


def _files(root):
    return sorted(
        osp.relpath(osp.join(d, f), root)
        for d, _, files in os.walk(root)
        for f in files
    )


@pytest.mark.slow
@pytest.mark.skipif(
    not osp.isdir(osp.join(SHARED, 'minesweeper')),
    reason='needs ../shared/data/heterophilous (the offline Minesweeper)',
)
def test_minesweeper(tmp_path):
    pytest.importorskip('matplotlib')
    data_root = tmp_path / 'data'
    shutil.copytree(osp.join(SHARED, 'minesweeper'), data_root / 'minesweeper')
    before = _files(data_root)
    proc = _run('--data-root', str(data_root), *SMALL,
                '--plot', str(tmp_path / 'alpha.png'))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'Minesweeper, split 0: 10000 nodes' in proc.stdout
    assert 'train/val/test 5000/2500/2500' in proc.stdout
    rows = {}
    for line in proc.stdout.splitlines():
        match = re.match(
            r'(GATE|GATv2) +([\d.]+) +([\d.]+) +([\d.]+) +(.*)', line
        )
        if match:
            alphas = re.findall(r'L\d: ([\d.]+)', match.group(5))
            rows[match.group(1)] = [float(v) for v in match.group(2, 3, 4)]
            rows[match.group(1)].append([float(a) for a in alphas])
    assert list(rows) == ['GATE', 'GATv2']
    for loss, val, test, alphas in rows.values():
        assert loss > 0 and 0 < val <= 1 and 0 < test <= 1
        assert len(alphas) == 2 and all(0 <= a <= 1 for a in alphas)
    for name in ('GATE', 'GATv2'):
        assert (tmp_path / f'alpha_{name}.png').stat().st_size > 0
    assert _files(data_root) == before  # the data root is never written to


def test_missing_data_root_is_a_clear_error(tmp_path):
    spec = importlib.util.spec_from_file_location('heterophilous', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # main() is not run
    with pytest.raises(FileNotFoundError) as e:
        module.load(str(tmp_path / 'nowhere'), 'Minesweeper', 0)
    message = str(e.value)
    assert 'No offline copy of Minesweeper under' in message
    assert osp.join('minesweeper', 'raw', 'minesweeper.npz') in message
    assert 'nothing is downloaded' in message
    assert not osp.exists(tmp_path / 'nowhere')
