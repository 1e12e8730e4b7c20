import csv
import os
import os.path as osp
import subprocess
import sys

from torch_geometric.testing import withPackage

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


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
    # The estimate is above what a full-batch step saves for backward.
    for row in rows[:2]:
        assert float(row['estimate_MB']) > float(row['measured_MB'])
    table = open(osp.join(out, 'scaling.md')).read()
    assert 'Command: `python' in table and '| GATE | mini-batch | 1 |' in table
