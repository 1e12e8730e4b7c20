r"""``benchmark/parity.py`` at a tiny size on the CPU (the Triton kernels
under the interpreter): the checks pass and are written, a failure is
exit code 1."""

import csv
import os

import pytest
from benchmark_testing import load_benchmark

parity = load_benchmark('parity')
TINY = ['--nodes', '12', '--edges', '40', '--isolated', '2',
        '--input-loops', '2', '--heads', '2', '--channels', '2',
        '--edge-dim', '2']  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get('TRITON_INTERPRET') != '1',
    reason='runs the Triton kernels under the interpreter',
)
def test_parity_passes_and_writes_every_check(tmp_path, monkeypatch):
    assert parity.main([*TINY, '--dtypes', 'float32', 'bfloat16',
                        '--out', str(tmp_path)]) == 0  # fmt: skip
    with open(tmp_path / 'parity.csv') as f:
        rows = list(csv.DictReader(f))
    checks = {(r['check'], r['dtype']) for r in rows}
    for dtype in ('float32', 'bfloat16'):
        assert ('dropout: share kept', dtype) in checks
        compared = {r['tensor'] for r in rows
                    if r['check'] == 'triton vs float32'
                    and r['dtype'] == dtype}  # fmt: skip
        # The output and every gradient, parameters included:
        assert {'out', 'grad x', 'grad edge_attr', 'grad att_neighbor',
                'grad lin_edge.weight'} <= compared  # fmt: skip
    assert {r['status'] for r in rows} <= {'ok', 'warn'}
    # A kernel that computes something else fails the check:
    step = parity.step

    def wrong(conv, x, edge_index, edge_attr, kernel, **kwargs):
        got = step(conv, x, edge_index, edge_attr, kernel, **kwargs)
        if kernel == 'triton':
            got['out'] = got['out'] + 1
        return got

    monkeypatch.setattr(parity, 'step', wrong)
    assert parity.main([*TINY, '--dtypes', 'float32',
                        '--out', str(tmp_path / 'bad')]) == 1  # fmt: skip
    assert '| fail |' in (tmp_path / 'bad' / 'parity.md').read_text()
