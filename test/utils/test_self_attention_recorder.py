import numpy as np
import pytest
import torch
import torch.nn.functional as F

from torch_geometric_gate.nn.models import GATE
from torch_geometric_gate.utils import SelfAttentionRecorder


def test_recorder_on_a_tiny_run():
    torch.manual_seed(0)
    x = torch.randn(10, 3)
    edge_index = torch.randint(0, 10, (2, 30))
    y = torch.randint(0, 2, (10,))
    model = GATE(3, 8, 2, out_channels=2, heads=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    recorder = SelfAttentionRecorder()
    for epoch in range(1, 41):  # More records than the initial buffer.
        optimizer.zero_grad()
        out, alphas = model.forward_with_self_attention(x, edge_index)
        F.cross_entropy(out, y).backward()
        optimizer.step()
        recorder.record(alphas, epoch)

    assert len(recorder) == 40 and recorder.num_layers == 2
    assert torch.equal(recorder.epochs, torch.arange(1, 41))
    history = recorder.history()
    assert (
        history.shape
        == (40, 2, len(SelfAttentionRecorder.STATS))
        == (40, 2, 13)
    )
    # The last row summarises the last alphas (both heads pooled):
    for layer, alpha_vv in enumerate(alphas):
        values = alpha_vv.detach().reshape(-1)
        expected = torch.cat(
            [
                torch.stack(
                    [values.mean(), values.std(), values.min(), values.max()]
                ),
                torch.quantile(values, torch.linspace(0.1, 0.9, 9)),
            ]
        )
        assert torch.allclose(history[-1, layer], expected, atol=1e-6)
        assert torch.equal(recorder.last[layer], alpha_vv.detach())
        assert torch.equal(
            recorder.stat('median', layer), history[:, layer, 8]
        )
    # The distribution changed during training:
    assert not torch.allclose(history[0], history[-1])
    q = history[..., 4:]
    assert bool((q[..., 1:] >= q[..., :-1]).all())
    assert bool((history[..., 2:3] <= q).all())
    assert bool((q <= history[..., 3:4]).all())

    state = recorder.state_dict()
    assert state['stats'][0] == 'mean' and state['history'].shape[0] == 40


def test_recorder_is_memory_light():
    recorder = SelfAttentionRecorder(keep_last=False)
    alpha_vv = torch.rand(100_000, 1)
    for _ in range(3):
        recorder.record([alpha_vv, alpha_vv])
    assert recorder.last is None
    assert torch.equal(recorder.epochs, torch.arange(3))
    # Only the summaries are kept:
    assert recorder.history().numel() == 3 * 2 * 13
    assert recorder._buffer.numel() <= 16 * 2 * 13
    # Deciles of 100k uniform values:
    assert torch.allclose(
        recorder.history(0)[0, 4:], torch.linspace(0.1, 0.9, 9), atol=0.01
    )


def test_recorder_errors():
    recorder = SelfAttentionRecorder()
    with pytest.raises(ValueError, match='Nothing recorded'):
        recorder.history()
    with pytest.raises(TypeError, match='list of tensors'):
        recorder.record(torch.rand(4, 1))
    with pytest.raises(ValueError, match='at least one layer'):
        recorder.record([])
    with pytest.raises(ValueError, match='non-empty'):
        recorder.record([torch.empty(0, 1)])
    recorder.record([torch.rand(4)])
    with pytest.raises(ValueError, match='Expected alpha_vv of 1 layers'):
        recorder.record([torch.rand(4), torch.rand(4)])
    with pytest.raises(ValueError, match="'layer' must be in"):
        recorder.history(layer=1)
    with pytest.raises(ValueError, match='Unknown statistic'):
        recorder.stat('q55', 0)


def test_recorder_rejects_nan():
    # NaN self-attention means that training diverged: the summary used to
    # mix a NaN mean with finite quantiles (median 0.5 of [0.5, nan, 0.2]).
    recorder = SelfAttentionRecorder()
    recorder.record([torch.rand(3), torch.rand(3)], epoch=0)
    before = recorder.history().clone()
    last = [a.clone() for a in recorder.last]
    bad = torch.tensor([0.5, float('nan'), 0.2])
    with pytest.raises(ValueError, match='layer 1 at epoch 7 holds 1 NaN'):
        recorder.record([torch.rand(3), bad], epoch=7)
    with pytest.raises(ValueError, match='layer 0 at epoch 1 .*diverged'):
        recorder.record([torch.tensor([float('inf'), 0.1, 0.2]), bad])
    # Nothing of the failed calls is kept:
    assert len(recorder) == 1
    assert torch.equal(recorder.history(), before)
    assert all(torch.equal(a, b) for a, b in zip(recorder.last, last))


def test_recorder_rejects_non_integer_epoch_and_layer():
    # A float epoch was truncated (1.7 recorded as 1), a string failed with
    # "invalid literal for int()"; a float or string layer with an
    # IndexError or a comparison TypeError.
    recorder = SelfAttentionRecorder()
    for epoch in [1.7, 'a', True]:
        with pytest.raises(TypeError, match="'epoch' must be an int"):
            recorder.record([torch.rand(3)], epoch=epoch)
    assert len(recorder) == 0
    recorder.record([torch.rand(3)], epoch=np.int64(4))
    recorder.record([torch.rand(3)], epoch=torch.tensor(5))
    assert recorder.epochs.tolist() == [4, 5]
    for layer in [0.5, 'a']:
        with pytest.raises(TypeError, match="'layer' must be an int"):
            recorder.history(layer)
        with pytest.raises(TypeError, match="'layer' must be an int"):
            recorder.stat('mean', layer)
    assert recorder.history(np.int64(-1)).shape == (2, 13)


def test_layer_range_in_the_error_names_negative_layers():
    # layer=-1 reads the last layer, but layer=-3 of 2 was refused with
    # "'layer' must be in [0, 2)", which -1 is not in either.
    recorder = SelfAttentionRecorder()
    a = [torch.rand(5), torch.rand(5)]
    recorder.record(a)
    assert torch.equal(recorder.history(-1), recorder.history(1))
    assert torch.equal(recorder.history(-2), recorder.history(0))
    for layer in (-3, 2):
        with pytest.raises(ValueError, match=r"'layer' must be in \[-2, 2\)"):
            recorder.history(layer)


@pytest.mark.parametrize(
    'alpha_vv',
    [
        torch.tensor([1, 0, 1]),
        torch.tensor([True, False, True]),
        torch.tensor([0.5, 0.25, 1.0]).to(torch.complex64),
        torch.tensor([0.5, 0.0, 1.0]).to_sparse(),
    ],
)
def test_recorder_rejects_non_float_alpha(alpha_vv):
    # Integer and boolean values were summarised as weights, complex ones by
    # their real part; sparse ones failed inside reshape.
    recorder = SelfAttentionRecorder()
    recorder.record([torch.rand(3)])
    with pytest.raises(TypeError) as info:
        recorder.record([alpha_vv])
    assert str(info.value) == (
        f'Expected alpha_vv of layer 0 as a dense floating-point tensor of '
        f'attention weights (got {alpha_vv.dtype}, {alpha_vv.layout})'
    )
    assert len(recorder) == 1 and recorder.last[0].dtype == torch.float32
    # Half precision is floating point and taken:
    recorder.record([torch.rand(3).half()])
    assert len(recorder) == 2


def test_state_dict_round_trip(tmp_path):
    # state_dict() was offered 'for torch.save', but nothing read it back
    # into a recorder (to plot or to go on recording).
    torch.manual_seed(0)
    alphas = [[torch.rand(6, 2), torch.rand(6, 2)] for _ in range(20)]
    recorder = SelfAttentionRecorder()
    for epoch, alpha_vv in enumerate(alphas[:17]):
        recorder.record(alpha_vv, 2 * epoch)
    torch.save(recorder.state_dict(), tmp_path / 'alpha.pt')

    restored = SelfAttentionRecorder()
    restored.load_state_dict(torch.load(tmp_path / 'alpha.pt'))
    assert len(restored) == 17 and restored.num_layers == 2
    assert torch.equal(restored.epochs, recorder.epochs)
    assert torch.equal(restored.history(), recorder.history())
    assert restored.last is None
    # Recording goes on where it stopped, as in the original recorder:
    for epoch, alpha_vv in enumerate(alphas[17:], 17):
        recorder.record(alpha_vv, 2 * epoch)
        restored.record(alpha_vv, 2 * epoch)
    assert torch.equal(restored.epochs, recorder.epochs)
    assert torch.equal(restored.history(), recorder.history())

    empty = SelfAttentionRecorder()
    restored.load_state_dict(empty.state_dict())
    assert len(restored) == 0 and restored.num_layers == 0

    state = recorder.state_dict()
    with pytest.raises(ValueError, match=r"with keys 'stats', 'epochs'"):
        restored.load_state_dict({'history': state['history']})
    with pytest.raises(ValueError, match=r'Expected the statistics \['):
        restored.load_state_dict({**state, 'stats': ['mean']})
    with pytest.raises(ValueError, match=r"and 'epochs' of shape"):
        restored.load_state_dict({**state, 'epochs': state['epochs'][:3]})


def test_changing_what_it_returns_leaves_the_records():
    # history() and epochs returned views of the buffer: an in-place edit
    # of a returned tensor changed the records.
    recorder = SelfAttentionRecorder()
    for epoch in range(3):
        recorder.record([torch.rand(6, 1), torch.rand(6, 1)], epoch)
    before = recorder.state_dict()
    recorder.history().zero_()
    recorder.history(layer=1).fill_(7.0)
    recorder.stat('mean', layer=0).fill_(7.0)
    recorder.epochs.fill_(7)
    after = recorder.state_dict()
    assert torch.equal(after['history'], before['history'])
    assert torch.equal(after['epochs'], before['epochs'])
    assert torch.equal(before['epochs'], torch.arange(3))
