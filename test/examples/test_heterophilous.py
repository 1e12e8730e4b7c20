r"""``examples/heterophilous.py``: GATE against GATv2 on Minesweeper,
downloaded through PyG's ``HeterophilousGraphDataset`` (from a local server
serving a copy of the offline data), its offline error, and ``--plot``."""

import importlib.util
import os
import os.path as osp
import re
import subprocess
import sys
import time

import pytest
from data_testing import (
    copy_shared,
    dead_url,
    local_url,
    needs_shared,
    serve,
    shared,
)
from script_testing import run_in_one_interpreter, script
from torch_geometric.datasets import HeterophilousGraphDataset

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SCRIPT = osp.join(ROOT, 'examples', 'heterophilous.py')
SMALL = ['--epochs', '3', '--num-layers', '2', '--hidden-channels', '8']
MINESWEEPER = ('heterophilous', 'minesweeper', 'raw', 'minesweeper.npz')


def _run(*argv):
    (result,) = run_in_one_interpreter(
        [script(SCRIPT, *argv)],
        env=dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1'),
    )
    return result


def _load_module():
    spec = importlib.util.spec_from_file_location('heterophilous', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # main() is not run
    return module


def _files(root):
    return sorted(
        osp.relpath(osp.join(d, f), root)
        for d, _, files in os.walk(root)
        for f in files
    )


@needs_shared(*MINESWEEPER)
def test_minesweeper_downloads_from_a_local_server(
    tmp_path, monkeypatch, capsys
):
    url = HeterophilousGraphDataset.url
    files = {f'{url}/minesweeper.npz': shared(*MINESWEEPER)}
    files = {local_url('', u): f for u, f in files.items()}
    with serve(files, tmp_path / 'server') as base:
        monkeypatch.setattr(
            HeterophilousGraphDataset, 'url', local_url(base, url)
        )
        data_root = tmp_path / 'data'  # missing: made by the download
        data = _load_module().load(str(data_root), 'Minesweeper', 3)
    out = capsys.readouterr()
    raw = osp.join(str(data_root), 'heterophilous', 'minesweeper', 'raw')
    assert out.out == f'Downloading Minesweeper into {raw}\n'
    assert out.err == ''  # no "Processing..." / "Done!"
    assert (data.num_nodes, int(data.train_mask.sum())) == (10000, 5000)
    assert _files(data_root) == [
        'heterophilous/minesweeper/processed/data.pt',
        'heterophilous/minesweeper/processed/pre_filter.pt',
        'heterophilous/minesweeper/processed/pre_transform.pt',
        'heterophilous/minesweeper/raw/minesweeper.npz',
    ]
    with (
        open(osp.join(raw, 'minesweeper.npz'), 'rb') as f,
        open(shared(*MINESWEEPER), 'rb') as g,
    ):
        assert f.read() == g.read()


@pytest.mark.parametrize('existing', [False, True])
def test_offline_is_a_clear_error_that_leaves_nothing(
    tmp_path, monkeypatch, existing
):
    url = dead_url(HeterophilousGraphDataset.url)
    monkeypatch.setattr(HeterophilousGraphDataset, 'url', url)
    data_root = tmp_path / 'data'
    if existing:  # a data root that exists stays as it was: empty
        data_root.mkdir()
    with pytest.raises(FileNotFoundError) as e:
        _load_module().load(str(data_root), 'Minesweeper', 0)
    raw = osp.join(
        str(data_root), 'heterophilous', 'minesweeper', 'raw',
        'minesweeper.npz',
    )  # fmt: skip
    assert str(e.value) == (
        'could not download Minesweeper (URLError: <urlopen error [Errno '
        f"111] Connection refused>); expected '{raw}' (PyG's "
        'HeterophilousGraphDataset layout). Without network, copy '
        'minesweeper.npz there, or point --data-root (or GATE_DATA_ROOT) at '
        'a folder that holds heterophilous/minesweeper/raw/minesweeper.npz'
    )
    assert os.listdir(tmp_path) == (['data'] if existing else [])
    assert _files(tmp_path) == []


def test_offline_leaves_no_folder_beside_another_dataset(
    tmp_path, monkeypatch
):
    # With heterophilous/ there already (another dataset of it downloaded),
    # a failed download left heterophilous/minesweeper/raw/ behind, empty.
    url = dead_url(HeterophilousGraphDataset.url)
    monkeypatch.setattr(HeterophilousGraphDataset, 'url', url)
    other = tmp_path / 'heterophilous' / 'tolokers' / 'raw' / 'tolokers.npz'
    other.parent.mkdir(parents=True)
    other.write_bytes(b'')
    with pytest.raises(FileNotFoundError, match='could not download'):
        _load_module().load(str(tmp_path), 'Minesweeper', 0)
    assert _files(tmp_path) == ['heterophilous/tolokers/raw/tolokers.npz']
    assert os.listdir(tmp_path / 'heterophilous') == ['tolokers']


def test_a_processing_failure_is_not_called_a_download_failure(tmp_path):
    # With the raw file in place, an OSError of the processing (here its
    # folder blocked by a file; or a read-only data root) was reported as
    # "could not download", telling to copy the file that was there.
    data_root = tmp_path / 'data'
    folder = data_root / 'heterophilous' / 'minesweeper'
    (folder / 'raw').mkdir(parents=True)
    (folder / 'raw' / 'minesweeper.npz').write_bytes(b'')
    (folder / 'processed').write_text('')
    with pytest.raises(OSError) as e:
        _load_module().load(str(data_root), 'Minesweeper', 0)
    raw, processed = folder / 'raw' / 'minesweeper.npz', folder / 'processed'
    assert str(e.value) == (
        f"could not process '{raw}' (FileExistsError: [Errno 17] File "
        f"exists: '{processed}'); PyG writes the processed dataset into "
        f"'{processed}': point --data-root (or GATE_DATA_ROOT) at a "
        'writable copy'
    )
    assert raw.exists()  # the user's file is kept


@pytest.mark.parametrize(
    'cut, why',
    [
        (0.5, 'BadZipFile: File is not a zip file'),
        (0.0, 'EOFError: No data left in file'),
    ],
)
def test_a_raw_file_cut_short_is_a_clear_error(tmp_path, capsys, cut, why):
    # PyG downloads into the final path: an interrupted download (or a copy
    # cut short) left a file that NumPy cannot read, and every later run
    # ended in NumPy's traceback.
    import numpy as np

    raw = tmp_path.joinpath(*MINESWEEPER)
    raw.parent.mkdir(parents=True)
    np.savez(raw, node_features=np.zeros((100, 7)))
    whole = raw.read_bytes()
    raw.write_bytes(whole[: int(cut * len(whole))])
    with pytest.raises(OSError) as e:
        _load_module().load(str(tmp_path), 'Minesweeper', 0)
    assert str(e.value) == (
        f"'{raw}' is not a whole Minesweeper file ({why}); remove it to "
        'download it again, or copy a whole one there'
    )
    assert raw.exists() and capsys.readouterr().out == ''


@pytest.mark.slow
@needs_shared(*MINESWEEPER)
def test_minesweeper(tmp_path):
    pytest.importorskip('matplotlib')
    data_root = copy_shared('heterophilous', tmp_path / 'data')
    plots = tmp_path / 'plots'
    plots.mkdir()  # an existing folder: the plots go into it
    proc = _run('--data-root', data_root, *SMALL, '--plot', str(plots))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'Minesweeper, split 0: 10000 nodes' in proc.stdout
    assert 'train/val/test 5000/2500/2500' in proc.stdout
    assert 'Processing' not in proc.stderr + proc.stdout
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
    # Issue 50, defect 12: into the folder, not beside it as plots_GATE.png.
    assert sorted(os.listdir(plots)) == [
        'Minesweeper_GATE.png',
        'Minesweeper_GATv2.png',
    ]
    assert all((plots / f).stat().st_size > 0 for f in os.listdir(plots))
    assert sorted(os.listdir(tmp_path)) == ['data', 'plots']
    assert f'Saved {plots / "Minesweeper_GATE.png"}' in proc.stdout


def test_plot_folder_is_checked_before_training(tmp_path, capsys):
    # Issue 50, defect 12: a --plot into a missing folder failed after all
    # the training; now the folder is made (or refused) first.
    parse_args = _load_module().parse_args
    missing = tmp_path / 'a' / 'b'
    assert parse_args(['--plot', str(missing)]).plot == str(missing)
    assert missing.is_dir()
    (tmp_path / 'file.png').write_text('')
    with pytest.raises(SystemExit) as e:
        parse_args(['--plot', str(tmp_path / 'file.png')])
    assert e.value.code == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith(
            f'error: argument --plot: '
            f"'{tmp_path / 'file.png'}' is not a folder"
        )
    )


def test_help_is_plain_and_fast():
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, '-X', 'importtime', SCRIPT, '--help'],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    imported = {
        line.split('|')[-1].strip() for line in proc.stderr.split('\n')
    }
    assert not {'torch', 'torch_geometric', 'sklearn'} & imported
    assert ':class:' not in proc.stdout and ':obj:' not in proc.stdout
    assert ':math:' not in proc.stdout
    assert '(default: None)' not in proc.stdout
    assert elapsed < 5, elapsed  # imports nothing heavy: well under 1 s


def test_the_roc_auc_of_a_diverged_model_is_nan_and_ties_are_kept_apart():
    # NaN logits (--lr 1e30) ended in scikit-learn's "Input contains NaN";
    # and the float32 probability of class 1 rounds to 1.0 above a logit
    # gap of about 17, tying the most confident nodes.
    import math

    import torch

    roc_auc = _load_module().roc_auc
    y, mask = torch.tensor([0, 1, 0, 1]), torch.ones(4, dtype=torch.bool)
    assert math.isnan(roc_auc(torch.full((4, 2), math.nan), y, mask))
    out = torch.tensor([[0.0, 30.0], [0.0, 40.0], [0.0, -1.0], [0.0, 1.0]])
    # Ranked by the logit difference: 40 > 30 > 1 > -1, one pair wrong.
    assert roc_auc(out, y, mask) == 0.75
