r"""``benchmark/triton_tune.py`` on a CPU: tiny graphs, the Triton kernels
under the interpreter (the timings mean nothing there; the table, the
tiles reaching the kernels through the switch's options, and the
settings left as they were, are checked)."""

import csv
import os

import pytest
from benchmark_testing import load_benchmark


def test_tiles_reach_the_kernels_and_defaults_come_back(tmp_path, monkeypatch):
    if os.environ.get('TRITON_INTERPRET') != '1':
        pytest.skip('runs the Triton kernels under the interpreter')
    from torch_geometric_gate.ops import current_settings
    from torch_geometric_gate.ops.triton import _launch as launch

    tune = load_benchmark('triton_tune')
    settings = current_settings()
    defaults = (settings.triton_forward_tile, settings.triton_backward_tile)
    tiles = []
    block_edges = launch._block_edges

    def spy(h_pad, c_pad, tile, degree):
        tiles.append(tile)
        return block_edges(h_pad, c_pad, tile, degree)

    monkeypatch.setattr(launch, '_block_edges', spy)
    rows = tune.main(
        ['--device', 'cpu', '--graphs', 'arxiv-size', '--scale', '3e-5',
         '--heads', '1', '2', '--hidden', '4', '--channels', '4',
         '--forward-tiles', '16', '64', '--backward-tiles', '32',
         '--warmup', '0', '--reps', '1', '--out', str(tmp_path)]
    )  # fmt: skip
    assert current_settings() == settings
    # 2 heads x (2 x 1 tiles + the defaults):
    assert len(rows) == 2 * 3
    pairs = {(r['forward_tile'], r['backward_tile']) for r in rows}
    assert pairs == {(16, 32), (64, 32), defaults}
    assert {16, 32, 64} <= set(tiles) and set(defaults) <= set(tiles)
    for r in rows:
        if (r['forward_tile'], r['backward_tile']) == defaults:
            assert r['x_current_tiles'] == 1.0
    with open(tmp_path / 'triton_tune.csv') as f:
        assert len(list(csv.reader(f))) == 1 + len(rows)
    text = (tmp_path / 'triton_tune.md').read_text()
    assert '- GPU: none' in text and text.count('\n| cpu |') == len(rows)
    assert 'python benchmark/triton_tune.py --device cpu' in text


def test_a_tile_that_is_no_power_of_two_is_a_usage_error(tmp_path, capsys):
    tune = load_benchmark('triton_tune')
    with pytest.raises(SystemExit) as stop:
        tune.main(['--device', 'cpu', '--forward-tiles', '1000',
                   '--out', str(tmp_path)])  # fmt: skip
    assert stop.value.code == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            "error: Expected 'triton_forward_tile' to be a power of two "
            '(got 1000)'
        )
    )
    assert not os.listdir(tmp_path)


def test_each_measurement_is_shown_as_it_is_taken(
    tmp_path, monkeypatch, capsys
):
    # The tune phase (up to 500 s on a GPU) printed nothing until it ended.
    tune = load_benchmark('triton_tune')
    times = iter(range(1, 100))
    monkeypatch.setattr(
        tune, '_measure', lambda step, device, args: (float(next(times)), None)
    )
    rows = tune.main(
        ['--device', 'cpu', '--graphs', 'random-100', '--heads', '1',
         '--hidden', '4', '--channels', '4', '--forward-tiles', '16',
         '--backward-tiles', '32', '64', '--out', str(tmp_path)]
    )  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == 'random-100 heads=1 float32 GATv2Conv: 1 ms'
    shown = lines[1:]
    assert len(shown) == len(rows)
    for line, row in zip(shown, rows):
        assert line == (
            f'random-100 heads=1 float32 GATE tiles {row["forward_tile"]}/'
            f'{row["backward_tile"]}: {row["step_ms"]:.4g} ms'
        )
