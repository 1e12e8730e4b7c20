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


def test_an_edge_index_input_is_a_line_of_its_own():
    # kernels.py --inputs plain edge-index: both inputs' rows went into the
    # line 'GATE triton', two points at the same edges joined as one line.
    plotting = load_benchmark('plotting')
    rows = [
        dict(device='cuda', graph='random-1e6', input=kind, num_edges=e,
             heads='1', dtype='float32', layer='GATE', kernel='triton',
             status='ok', step_ms=str(ms), peak_mb='1', saved_mb='1')
        for kind, e, ms in (('plain', 1000, 1.0), ('edge-index', 1000, 0.5),
                            ('plain', 2000, 2.0))
    ]  # fmt: skip
    lines = {}
    for p in plotting.plot_points(rows):
        lines.setdefault(p['line'], []).append((p['edges'], p['ms']))
    assert lines == {
        'GATE triton': [(1000, 1.0), (2000, 2.0)],
        'GATE triton (edge-index)': [(1000, 0.5)],
    }
