import csv
import os
import os.path as osp
import subprocess
import sys

import pytest
from benchmark_testing import ROOT, load_benchmark
from torch_geometric.testing import withPackage


@pytest.mark.slow
@withPackage('torch_sparse')
def test_scaling_benchmark_writes_its_table(tmp_path):
    out = str(tmp_path / 'scaling')
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    proc = subprocess.run(
        [sys.executable, osp.join(ROOT, 'benchmark', 'scaling.py'), out,
         '--num-nodes', '300', '--num-features', '8', '--num-classes', '3',
         '--num-layers', '2', '--hidden-channels', '8', '--batch-size', '32',
         '--num-neighbors', '3', '--epochs', '2', '--reps', '1',
         '--procs', '1'],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(osp.join(out, 'scaling.csv'), newline='') as f:
        rows = list(csv.DictReader(f))
    assert [(r['model'], r['setting']) for r in rows] == [
        ('GATE', 'full batch'),
        ('GATv2', 'full batch'),
        ('GATE', 'mini-batch'),
        ('GATv2', 'mini-batch'),
    ]
    for row in rows:
        assert float(row['nodes_per_s']) > 0
        assert float(row['measured_MB']) > 0
    table = open(osp.join(out, 'scaling.md')).read()
    assert 'Command: `python benchmark/scaling.py' in table
    assert '| GATE | mini-batch | 1 |' in table


def test_out_dir_naming_a_file_is_a_usage_error(tmp_path, capsys):
    scaling = load_benchmark('scaling')
    (tmp_path / 'file').write_text('')
    for bad, expected in (
        (tmp_path / 'file', 'expected a folder'),
        (tmp_path / 'file' / 'sub', 'cannot create the folder'),
    ):
        with pytest.raises(SystemExit) as e:
            scaling.main([str(bad)])
        assert e.value.code == 2
        assert f'argument out_dir: {expected}' in capsys.readouterr().err
