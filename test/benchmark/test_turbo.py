r"""``benchmark/turbo.py``: GATE's side of the turbo-gnn comparison computes
GATv2's attention on the prebuilt CSR (checked against a dense float64
GATv2, under the Triton interpreter on CPU), turbo-gnn's CSR is the
transpose pair it expects, and the build records its failures."""

import importlib.util
import json
import os

import pytest
import torch
from benchmark_testing import ROOT, load_benchmark

if importlib.util.find_spec('triton') is None:
    pytest.skip('Triton is not installed', allow_module_level=True)

turbo = load_benchmark('turbo')
common = load_benchmark('common')
DEVICE = torch.device(
    'cuda'
    if torch.cuda.is_available() and os.environ.get('TRITON_INTERPRET') != '1'
    else 'cpu'
)


def dense_gatv2(edge_index, n, left, right, att, value, slope):
    r"""out[v] = sum_u softmax_u(a . lrelu(left[v] + right[u])) value[u],
    with an [N, E] incidence matrix, in float64."""
    src, dst = edge_index
    z = left[dst] + right[src]
    score = (torch.where(z > 0, z, slope * z) * att).sum(-1)  # [E, H]
    member = dst[None, :] == torch.arange(n, device=src.device)[:, None]
    scores = torch.where(member[..., None], score[None], float('-inf'))
    top = scores.amax(1, keepdim=True).detach()
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    weight = torch.where(member[..., None], (scores - top).exp(), 0.0)
    total = weight.sum(1, keepdim=True)
    alpha = (weight / torch.where(total > 0, total, 1.0)).sum(0)
    return torch.einsum(
        'ne,ehc->nhc', member.double(), alpha[..., None] * value[src]
    )


@pytest.mark.parametrize('shared', [True, False])
def test_gate_step_computes_gatv2_on_the_prebuilt_csr(shared):
    x, edge_index = common.random_graph(12, 60, 4, seed=3, device=DEVICE)
    n, heads, channels = x.size(0), 2, 4
    g = turbo.Graph(edge_index, n)
    gen = torch.Generator().manual_seed(0)

    def rand(*size):
        return torch.randn(*size, generator=gen).to(DEVICE)

    left, right, value, grad_out = (rand(n, heads, channels) for _ in '1234')
    att = rand(heads, channels)
    got_out, got = turbo.gate_step(
        g, left, right, att, grad_out, None if shared else value
    )
    inputs = [t.double().requires_grad_() for t in (left, right, att, value)]
    d_left, d_right, d_att, d_value = inputs
    want = dense_gatv2(
        edge_index, n, d_left, d_right, d_att,
        d_right if shared else d_value, turbo.SLOPE,
    )  # fmt: skip
    wanted = [d_left, d_right] + ([] if shared else [d_value]) + [d_att]
    grads = torch.autograd.grad(want, wanted, grad_out.double())
    torch.testing.assert_close(got_out.double(), want, atol=2e-5, rtol=1e-4)
    assert len(got) == len(grads)
    for a, b in zip(got, grads):
        torch.testing.assert_close(a.double(), b, atol=2e-5, rtol=1e-4)


def test_turbo_csr_is_the_incoming_csr_and_its_transpose():
    x, edge_index = common.random_graph(30, 200, 4, seed=1, device=DEVICE)
    n = x.size(0)
    g = turbo.Graph(edge_index, n)
    pairs = set(map(tuple, edge_index.t().tolist()))

    def edges(ptr, idx, rows_are_targets):
        out = set()
        for row in range(n):
            for col in idx[ptr[row] : ptr[row + 1]].tolist():
                out.add((col, row) if rows_are_targets else (row, col))
        return out

    assert g.row_ptr.dtype == g.col_idx.dtype == torch.int32
    assert edges(g.row_ptr.tolist(), g.col_idx, True) == pairs
    assert edges(g.row_ptr_t.tolist(), g.col_idx_t, False) == pairs
    light, heavy = g.fwd_buckets
    assert sorted(torch.cat([light, heavy]).tolist()) == list(range(n))


def test_build_records_missing_sources_and_refuses_the_checkout(tmp_path):
    got = turbo.build(str(tmp_path / 'b'), str(tmp_path / 'nowhere'))
    assert got['status'] == 'failed' and 'source missing' in got['error']
    saved = json.loads((tmp_path / 'b' / 'build.json').read_text())
    assert saved == got
    module, why = turbo.built_module(str(tmp_path / 'b'))
    assert module is None and 'build failed' in why
    module, why = turbo.built_module(str(tmp_path / 'never'))
    assert module is None and 'not built' in why
    inside = os.path.join(ROOT, 'benchmark', 'turbo-build-test')
    with pytest.raises(ValueError, match='outside the checkout'):
        turbo.build(inside, str(tmp_path))
    assert not os.path.exists(inside)


def test_a_built_library_that_does_not_load_is_a_result(tmp_path):
    (tmp_path / 'build.json').write_text(json.dumps(dict(
        status='ok', library=str(tmp_path / 'missing.so'), seconds=1.0
    )))  # fmt: skip
    module, why = turbo.built_module(str(tmp_path))
    assert module is None and why.startswith('turbo-gnn load failed')


def test_real_graphs_are_read_from_the_data_root(tmp_path):
    # turbo.py took --graphs cora but had no --data-root: it read ./data
    # whatever the caller had.
    root = tmp_path / 'none'
    rows = turbo.main(['--compare', str(tmp_path / 'built'), '--graphs',
                       'cora', '--data-root', str(root), '--device', 'cpu',
                       '--out', str(tmp_path)])  # fmt: skip
    assert len(rows) == 1
    assert f"'{root / 'Planetoid'}' not found" in rows[0]['status']
