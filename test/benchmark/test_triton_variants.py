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
