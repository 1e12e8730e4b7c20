r"""``benchmark/triton_variants.py``: each variant's time over its group's
baseline, the group's first variant, from the same run."""

import pytest
from benchmark_testing import load_benchmark


def test_a_failed_baseline_leaves_its_group_without_ratios(
    tmp_path, monkeypatch
):
    # When a group's baseline failed, the next variant that ran became the
    # baseline: the variants after it reported vs_baseline against it.
    variants = load_benchmark('triton_variants')

    def fails():
        raise RuntimeError('baseline broke')

    def ok():
        return None

    def fake(case, heads):
        return [
            ('forward', 'base', fails),
            ('forward', 'a', ok),
            ('forward', 'b', ok),
            ('backward', 'base', ok),
            ('backward', 'a', ok),
        ]

    monkeypatch.setattr(variants, 'variants', fake)
    argv = ['--graphs', 'random-100', '--heads', '1', '--hidden', '4',
            '--reps', '1', '--warmup', '0', '--device', 'cpu',
            '--out', str(tmp_path)]  # fmt: skip
    rows = variants.main(argv)
    got = {(r['what'], r['variant']): r for r in rows}
    assert got['forward', 'base']['status'].startswith('error: RuntimeError')
    for name in ('a', 'b'):
        assert got['forward', name]['status'] == 'ok'
        assert 'vs_baseline' not in got['forward', name]
    backward = got['backward', 'a']
    assert backward['vs_baseline'] == pytest.approx(
        backward['ms'] / got['backward', 'base']['ms']
    )


def test_the_layer_weights_group_times_the_loops_weights_alone():
    # The self-loops' weights alone (forward_with_self_attention) beside all
    # E x H weights and none, through the layer: the same output each time,
    # and the loops' weights those of the loops among all the weights.
    import torch

    variants = load_benchmark('triton_variants')
    from common import load_graph

    x, edge_index = load_graph('random-100', 8, torch.device('cpu'), None)
    n = x.size(0)
    case = variants.Case(edge_index, n, 2, 4, torch.float32, 'cpu')
    layer = case.layer()
    got = {
        name: variants.layer_forward(layer, name)()
        for name in ('none', 'E x H', 'loops')
    }
    out, alpha = got['E x H']
    assert torch.allclose(got['none'], out, atol=1e-6)
    assert torch.allclose(got['loops'][0], out, atol=1e-6)
    ei = layer[2]
    assert alpha.shape == (ei.size(1) + n, 2)  # The loops appended last:
    assert got['loops'][1].shape == (n, 2)
    assert torch.allclose(got['loops'][1], alpha[-n:], atol=1e-6)
    names = [(w, v) for w, v, _ in variants.variants(case, 2)]
    assert [v for w, v in names if w == 'layer weights'] == [
        'none',
        'E x H',
        'loops N x H',
    ]
