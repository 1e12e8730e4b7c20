r"""``benchmark/parity.py`` at a tiny size on the CPU (the Triton kernels
under the interpreter): the checks pass and are written, a failure is
exit code 1."""

import csv
import os

import pytest
import torch
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
    # One run: float32 as the kernels compute it, bfloat16 with a Triton
    # output made wrong, which must fail its check and the exit code.
    step = parity.step

    def wrong_in_bf16(conv, x, edge_index, edge_attr, kernel, **kwargs):
        got = step(conv, x, edge_index, edge_attr, kernel, **kwargs)
        if kernel == 'triton' and x.dtype == torch.bfloat16:
            got['out'] = got['out'] + 1
        return got

    monkeypatch.setattr(parity, 'step', wrong_in_bf16)
    assert parity.main([*TINY, '--dtypes', 'float32', 'bfloat16',
                        '--out', str(tmp_path)]) == 1  # fmt: skip
    with open(tmp_path / 'parity.csv') as f:
        rows = list(csv.DictReader(f))
    checks = {(r['check'], r['dtype']) for r in rows}
    for dtype in ('float32', 'bfloat16'):
        assert ('dropout: share kept', dtype) in checks
        assert ('dropout: same seed, same mask', dtype) in checks
        compared = {r['tensor'] for r in rows
                    if r['check'] == 'triton vs float32'
                    and r['dtype'] == dtype}  # fmt: skip
        # The output and every gradient, parameters included:
        assert {'out', 'grad x', 'grad edge_attr', 'grad att_neighbor',
                'grad lin_edge.weight'} <= compared  # fmt: skip
    status = {(r['check'], r['dtype'], r['tensor']): r['status'] for r in rows}
    assert {s for (_, dtype, _), s in status.items()
            if dtype == 'float32'} <= {'ok', 'warn'}  # fmt: skip
    failed = {key for key, s in status.items() if s == 'fail'}
    assert ('triton vs float32', 'bfloat16', 'out') in failed
    assert all(dtype == 'bfloat16' for _, dtype, _ in failed)
    assert '| fail |' in (tmp_path / 'parity.md').read_text()
