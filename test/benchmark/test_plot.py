r"""``benchmark/plot.py``: a plot from the results CSVs, and a usage error,
not a blank plot, for a CSV of another kind or one without rows."""

import os

import pytest
from benchmark_testing import ROOT, load_benchmark

plot = load_benchmark('plot')
RESULTS = os.path.join(ROOT, 'benchmark', 'results')


@pytest.mark.slow
def test_plots_the_committed_kernel_and_pair_results(tmp_path):
    pytest.importorskip('matplotlib')
    out = tmp_path / 'both.png'
    points = plot.main([os.path.join(RESULTS, 'cpu-kernels.csv'),
                        os.path.join(RESULTS, 'cpu-pair.csv'),
                        '--out', str(out)])  # fmt: skip
    lines = {p['line'] for p in points}
    assert {'GATE chunked', 'GATv2 eager', 'GATE compiled'} <= lines
    assert all(p['ms'] > 0 for p in points)
    assert out.stat().st_size > 0


@pytest.mark.parametrize(
    'text, expected',
    [
        ('', 'found no header'),
        ('model,setting\nGATE,full batch\n', 'not a results CSV of'),
        (
            'device,graph,num_edges,heads,dtype,layer,kernel,status,'
            'step_ms,peak_mb,saved_mb\n',
            'no finished training-step row of benchmark/kernels.py',
        ),
        (
            'device,graph,num_edges,heads,dtype,layer,kernel,status,'
            'step_ms,peak_mb,saved_mb\ncpu,cora,1,1,float32,GATE,triton,'
            'skipped (needs CUDA),,,\n',
            'no finished training-step row',
        ),
    ],
)
def test_a_csv_of_another_kind_or_empty_is_a_usage_error(
    tmp_path, capsys, text, expected
):
    path = tmp_path / 'in.csv'
    path.write_text(text)
    out = tmp_path / 'out.png'
    with pytest.raises(SystemExit) as e:
        plot.main([str(path), '--out', str(out)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert expected in err and str(path) in err
    assert not out.exists()
