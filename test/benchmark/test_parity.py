r"""``benchmark/parity.py`` at a tiny size on the CPU (the Triton kernels
under the interpreter): the checks pass and are written, a failure is
exit code 1."""

import csv
import os

import pytest
import torch
from benchmark_testing import load_benchmark
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from torch_geometric_gate import GATEConv

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

    def wrong_in_bf16(conv, x, edge_index, edge_attr, kernel, *args,
                      **kwargs):  # fmt: skip
        got = step(conv, x, edge_index, edge_attr, kernel, *args, **kwargs)
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


class _CopiesFromCPU(TorchDispatchMode):
    r"""The operators that read a CPU tensor into one of another device
    (on CUDA a copy that syncs with the host)."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        devices = [t.device.type for t in tree_leaves((args, kwargs))
                   if isinstance(t, torch.Tensor)]  # fmt: skip
        if 'cpu' in devices and any(
            isinstance(t, torch.Tensor) and t.device.type != 'cpu'
            for t in tree_leaves(out)
        ):
            self.ops.append(str(func))
        return out


@pytest.mark.parametrize('kernel', ['chunked', 'reference'])
def test_a_step_copies_nothing_from_the_cpu(kernel):
    # On CUDA the step's gradient was drawn on the CPU and copied to the
    # device inside the step: a host sync that `cuda_syncs` counted as the
    # layer's ('host syncs of a step' read 1 on an H100 for a layer
    # without one). On the meta device, a stand-in for CUDA here: no
    # operator of the step reads a CPU tensor into the device.
    device = torch.device('meta')
    conv = GATEConv(4, 2, heads=2, edge_dim=2).to(device)
    x = torch.randn(5, 4, device=device)
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]], device=device)
    edge_attr = torch.randn(4, 2, device=device)
    grad = torch.randn(5, 4, device=device)
    with _CopiesFromCPU() as copies:
        got = parity.step(conv, x, edge_index, edge_attr, kernel, grad)
    assert copies.ops == []
    assert got['out'].shape == (5, 4) and got['grad x'].shape == (5, 4)
