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


def test_the_docs_deep_table_gives_the_result_in_the_unit_it_names():
    # deep.py's *_mb columns are MiB (bytes / 2**20); the benchmark page's
    # table copied them under "(MB)", 5% below the megabytes it named.
    import csv
    import re

    from benchmark_testing import ROOT

    with open(f'{ROOT}/benchmark/results/cpu-deep.csv') as f:
        gate = next(r for r in csv.DictReader(f) if r['layer'] == 'GATE')
    with open(f'{ROOT}/docs/source/benchmark.rst') as f:
        text = f.read()
    table = text[text.index('   * - layer\n') :].split('\n\n')[0]
    cells = re.findall(r'^\s+[*]? +- (.*)$', table, re.M)
    header, row = cells[1:4], cells[5:8]
    assert cells[4] == 'GATEConv'
    assert [h.rsplit('(', 1)[1] for h in header] == ['MiB)'] * 3
    for shown, key in zip(row, ('peak_mb', 'step_mb', 'saved_mb')):
        assert int(shown.replace(',', '')) == round(float(gate[key]))
