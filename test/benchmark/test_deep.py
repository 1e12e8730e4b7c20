r"""``benchmark/deep.py``: each model in its own process, under a cap."""

import pytest
from benchmark_testing import load_benchmark

deep = load_benchmark('deep')


@pytest.mark.slow
def test_gate_fits_under_a_cap_that_gatv2conv_exceeds(tmp_path):
    # 4 layers 256 wide on 3% of ogbn-arxiv under 0.6 GiB of address
    # space: GATE fits; GATv2Conv's [E, H, C] tensors do not.
    argv = ['--scale', '0.03', '--depth', '4', '--cap-gb', '0.6',
            '--devices', 'cpu', '--out', str(tmp_path)]  # fmt: skip
    rows = {r['layer']: r for r in deep.main(argv)}
    gate, gatv2 = rows['GATE'], rows['GATv2']
    assert gate['status'] == 'ok', gate
    assert 0 < gate['saved_mb'] and 0 < gate['step_mb'] < 0.6 * 1024
    assert gate['num_nodes'] == int(169343 * 0.03)
    assert gatv2['status'] == 'exceeds cap', gatv2
    assert gatv2['detail'].startswith('in ')  # The layer, or backward.
    text = (tmp_path / 'deep.md').read_text()
    assert 'exceeds cap' in text and 'RLIMIT_AS' in text


def test_hidden_must_split_into_heads(capsys):
    with pytest.raises(SystemExit):
        deep.parse_args(['--hidden', '10', '--heads', '4'])
    assert 'multiple of --heads' in capsys.readouterr().err
