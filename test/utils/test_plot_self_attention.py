import io

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.testing import withPackage

from torch_geometric_gate.nn.models import GATE
from torch_geometric_gate.utils import (
    SelfAttentionRecorder,
    plot_self_attention_histogram,
    plot_self_attention_history,
)


def _tiny_run():
    torch.manual_seed(0)
    x = torch.randn(10, 3)
    edge_index = torch.randint(0, 10, (2, 30))
    y = torch.randint(0, 2, (10,))
    model = GATE(3, 8, 3, out_channels=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    recorder = SelfAttentionRecorder()
    for _ in range(15):
        optimizer.zero_grad()
        out, alphas = model.forward_with_self_attention(x, edge_index)
        F.cross_entropy(out, y).backward()
        optimizer.step()
        recorder.record(alphas)
    return recorder


@withPackage('matplotlib')
@pytest.mark.parametrize('ext', ['png', 'pdf'])
def test_plots_on_a_tiny_run(tmp_path, ext):
    recorder = _tiny_run()
    path = tmp_path / f'history.{ext}'
    fig = plot_self_attention_history(
        recorder, path, title='tiny', layer_names=['a', 'b', 'c']
    )
    assert [ax.get_title() for ax in fig.axes] == ['a', 'b', 'c']
    assert path.stat().st_size > 1000

    path = tmp_path / f'histogram.{ext}'
    fig = plot_self_attention_histogram(recorder, path, bins=10)
    assert len(fig.axes) == 3
    assert path.stat().st_size > 1000
    # The bars are the fractions of nodes per bin:
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert len(heights) == 10 and abs(sum(heights) - 1.0) < 1e-6

    magic = b'\x89PNG' if ext == 'png' else b'%PDF'
    assert path.read_bytes()[:4] == magic


@withPackage('matplotlib')
def test_plot_errors():
    with pytest.raises(ValueError, match='no records'):
        plot_self_attention_history(SelfAttentionRecorder())
    with pytest.raises(TypeError, match='SelfAttentionRecorder'):
        plot_self_attention_history([torch.rand(3)])
    with pytest.raises(ValueError, match='no last values'):
        plot_self_attention_histogram(SelfAttentionRecorder())
    with pytest.raises(TypeError, match='list of tensors'):
        plot_self_attention_histogram(torch.rand(3))
    with pytest.raises(ValueError, match="'bins' must be"):
        plot_self_attention_histogram([torch.rand(3)], bins=0)
    recorder = SelfAttentionRecorder()
    recorder.record([torch.rand(3)])
    with pytest.raises(ValueError, match="Expected 1 'layer_names'"):
        plot_self_attention_history(recorder, layer_names=['a', 'b'])


@withPackage('matplotlib')
def test_plot_to_a_directory_raises(tmp_path):
    # matplotlib used to write '<dir>.png' beside the directory:
    recorder = SelfAttentionRecorder()
    recorder.record([torch.rand(3)])
    for plot in [plot_self_attention_history, plot_self_attention_histogram]:
        for path in [tmp_path, str(tmp_path)]:
            with pytest.raises(ValueError, match='got the directory'):
                plot(recorder, path)
    assert list(tmp_path.iterdir()) == []
    assert not tmp_path.with_suffix('.png').exists()


@withPackage('matplotlib')
def test_plot_path_of_another_type_raises():
    # matplotlib failed in its writer: "'int' object has no attribute
    # 'write'".
    recorder = SelfAttentionRecorder()
    recorder.record([torch.rand(3)])
    for plot in [plot_self_attention_history, plot_self_attention_histogram]:
        with pytest.raises(TypeError, match=r"'path' must be.*got int"):
            plot(recorder, 3)
        buffer = io.BytesIO()  # a file object is a path matplotlib takes
        plot(recorder, buffer)
        assert buffer.getvalue().startswith(b'\x89PNG')


@withPackage('matplotlib')
def test_histogram_rejects_nan():
    # NaN values were left out of the histogram and the legend read
    # 'mean nan', without an error.
    bad = torch.tensor([0.5, float('nan'), 0.2])
    with pytest.raises(ValueError, match='layer 1 holds 1 NaN.*diverged'):
        plot_self_attention_histogram([torch.rand(3), bad])
    with pytest.raises(ValueError, match='layer 0 holds 1 NaN'):
        plot_self_attention_histogram([torch.tensor([float('inf'), 0.1])])


@withPackage('matplotlib')
def test_histogram_rejects_values_outside_the_unit_interval():
    # Scores or logits passed for alpha_vv were clamped into the first and
    # the last bin without an error, and the mean line left the axes.
    for bad in (torch.tensor([0.5, 2.0]), torch.tensor([-0.5, 0.2])):
        with pytest.raises(
            ValueError,
            match=r'layer 1 holds values outside \[0, 1\] \(from '
            rf'{float(bad.min()):.4g} to {float(bad.max()):.4g}\)',
        ):
            plot_self_attention_histogram([torch.rand(3), bad])
    # Above 1: the weights of a training step with dropout, most likely.
    with pytest.raises(ValueError, match=r'dropout .* record them in eval'):
        plot_self_attention_histogram([torch.tensor([0.5, 2.0])])
    with pytest.raises(ValueError, match=r'or logits$'):
        plot_self_attention_histogram([torch.tensor([-0.5, 0.5])])
    # Rounding just past 0 or 1 is clamped into the edge bins:
    alpha = torch.tensor([-1e-7, 0.5, 1.0 + 1e-6, 1.0])
    fig = plot_self_attention_histogram([alpha], bins=2)
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert heights == [0.25, 0.75]


@withPackage('matplotlib')
def test_layer_names_must_not_be_one_string():
    # 'ab' named two layers 'a' and 'b'; 'a' named one layer 'a'.
    recorder = SelfAttentionRecorder()
    recorder.record([torch.rand(3), torch.rand(3)])
    for plot in [plot_self_attention_history, plot_self_attention_histogram]:
        with pytest.raises(TypeError, match="'layer_names' must be a list"):
            plot(recorder, layer_names='ab')
    fig = plot_self_attention_histogram(recorder, layer_names=('x', 'y'))
    assert [ax.get_title() for ax in fig.axes] == ['x', 'y']


@withPackage('matplotlib')
def test_histogram_bins_take_numpy_integers():
    # bins=np.int64(5) was refused ("'bins' must be a positive int (got
    # np.int64(5))"), though the package takes NumPy integers elsewhere.
    import numpy as np

    alpha_vv = [torch.rand(20)]
    fig = plot_self_attention_histogram(alpha_vv, bins=np.int64(5))
    ref = plot_self_attention_histogram(alpha_vv, bins=5)
    heights = [[p.get_height() for p in f.axes[0].patches] for f in (fig, ref)]
    assert len(heights[0]) == 5 and heights[0] == heights[1]
    with pytest.raises(TypeError, match="'bins' must be an int"):
        plot_self_attention_histogram(alpha_vv, bins=5.0)
    with pytest.raises(ValueError, match="'bins' must be at least 1"):
        plot_self_attention_histogram(alpha_vv, bins=np.int64(0))


@withPackage('matplotlib')
def test_history_is_drawn_in_epoch_order():
    # Records made out of epoch order were drawn in record order: the bands
    # and lines ran back and forth along the epoch axis.
    torch.manual_seed(0)
    alphas = {epoch: [torch.rand(20, 2)] for epoch in (5, 1, 3, 2, 4)}
    shuffled, ordered = SelfAttentionRecorder(), SelfAttentionRecorder()
    for epoch, alpha_vv in alphas.items():
        shuffled.record(alpha_vv, epoch)
    for epoch in sorted(alphas):
        ordered.record(alphas[epoch], epoch)
    median, mean = plot_self_attention_history(shuffled).axes[0].lines
    assert median.get_xdata().tolist() == [1, 2, 3, 4, 5]
    assert median.get_ydata().tolist() == ordered.stat('median', 0).tolist()
    assert mean.get_ydata().tolist() == ordered.stat('mean', 0).tolist()


@withPackage('matplotlib')
def test_history_of_one_record_is_visible():
    # One record drew zero-width bands and one-point lines: empty panels.
    torch.manual_seed(0)
    recorder = SelfAttentionRecorder()
    recorder.record([torch.rand(20, 2), torch.rand(20)], epoch=7)
    fig = plot_self_attention_history(recorder)
    for layer, ax in enumerate(fig.axes):
        median, mean = ax.lines
        assert median.get_xdata().tolist() == [6.5, 7.5]
        assert median.get_ydata().tolist() == 2 * [
            float(recorder.stat('median', layer))
        ]
        assert mean.get_ydata().tolist() == 2 * [
            float(recorder.stat('mean', layer))
        ]
        # Each band (min-max outermost) spans the epoch's width:
        band = ax.collections[0].get_paths()[0].vertices
        assert band[:, 0].min() == 6.5 and band[:, 0].max() == 7.5
        assert band[:, 1].min() == pytest.approx(
            float(recorder.stat('min', layer))
        )
        assert band[:, 1].max() == pytest.approx(
            float(recorder.stat('max', layer))
        )


@withPackage('matplotlib')
def test_history_axes_hold_values_beyond_one():
    # In training mode, attention dropout scales the kept weights by
    # 1 / (1 - p): alpha_vv above 1 was cut off at 1.02.
    torch.manual_seed(0)
    model = GATE(3, 8, 2, dropout=0.6).train()
    x = torch.randn(10, 3)
    edge_index = torch.randint(0, 10, (2, 30))
    recorder = SelfAttentionRecorder()
    for _ in range(3):
        recorder.record(model.forward_with_self_attention(x, edge_index)[1])
    top = float(
        recorder.history()[..., SelfAttentionRecorder.STATS.index('max')].max()
    )
    assert top > 1.02
    fig = plot_self_attention_history(recorder)
    for ax in fig.axes:
        low, high = ax.get_ylim()
        assert low == -0.02 and high >= top
    # Weights in [0, 1] keep the unit axes:
    recorder = SelfAttentionRecorder()
    recorder.record([torch.rand(10)])
    assert plot_self_attention_history(recorder).axes[0].get_ylim() == (
        -0.02,
        1.02,
    )
