import math

import pytest
import torch

from gate_paper.models import build_model
from gate_paper.training import (
    Diverged,
    Selector,
    mask_index,
    run_epochs,
    train,
)


def select(better, values, **kwargs):
    selector = Selector('v', better, **kwargs)
    running = torch.ones((), dtype=torch.bool)
    for epoch, value in enumerate(values, start=1):
        selector.update(
            epoch,
            {
                'v': torch.tensor(value, dtype=torch.float64),
                'w': torch.tensor(-value, dtype=torch.float64),
            },
            running,
        )
    return selector.result()


@pytest.mark.parametrize(
    'better, values, epoch',
    [
        ('max', [0.5, math.nan, 0.4, 0.5], 1),
        ('min', [1.0, math.nan, 2.0, 0.5], 4),
        ('max', [math.nan, 0.2, math.nan], 2),
    ],
)
def test_selector_never_picks_a_nan_epoch(better, values, epoch):
    # The selector could pick a diverged epoch (issue 35, item 9).
    result = select(better, values)
    assert result['epoch'] == epoch
    assert result['value'] == values[epoch - 1]
    assert result['at']['w'] == -values[epoch - 1]


def test_selector_of_a_run_that_never_had_a_number():
    result = select('max', [math.nan, math.nan])
    assert result['epoch'] == 0 and math.isnan(result['value'])
    assert math.isnan(result['at']['v'])


def test_selector_stops():
    assert select('min', [3.0, 2.0, 0.5, 0.1], stop_below=1.0)['epoch'] == 3
    result = select('max', [1.0, 2.0, 1.0, 1.0, 3.0], patience=2)
    assert result['epoch'] == 2 and result['stopped'] and result['last'] == 4


def test_selector_first_and_last():
    assert select('first', [0.5, 1.0, 1.0], target=1.0)['epoch'] == 2
    assert select('last', [0.5, math.nan])['epoch'] == 2
    with pytest.raises(ValueError, match="'max', 'min', 'first' or 'last'"):
        Selector('v', 'best')


def tiny_graph():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(30, 4, generator=gen)
    edge_index = torch.randint(0, 30, (2, 90), generator=gen)
    y = torch.randint(0, 3, (30,), generator=gen)
    return x, edge_index, y


def fit(lr, recorder=None, epochs=20):
    from torch_geometric_gate.utils import SelfAttentionRecorder

    torch.manual_seed(0)
    x, edge_index, y = tiny_graph()
    model = build_model('synthetic', 'GATE', 4, 16, 3, 5)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    best = Selector('loss', 'min')
    epochs = train(
        model,
        optimizer,
        x,
        edge_index,
        y,
        mask_index(torch.arange(30) < 20),
        lambda out, loss, alphas: {'loss': loss.detach()},
        [best],
        epochs,
        recorder=SelfAttentionRecorder() if recorder else None,
    )
    return epochs, best.result()


def test_train_runs_and_selects():
    epochs, best = fit(0.01)
    assert epochs == 20 and 1 <= best['epoch'] <= 20
    assert math.isfinite(best['value'])


@pytest.mark.parametrize('recorder', [True, False])
def test_train_raises_diverged_on_nan(recorder):
    # With --lr 1e9 the recorder raised a ValueError on NaN alpha, which
    # ended the sweep (issue 35, item 8): now it is a Diverged run.
    with pytest.raises(Diverged, match='diverged at epoch'):
        fit(1e9, recorder=recorder, epochs=50)


def stop_then_nan(check_every, nan_from):
    r"""The validation value improves until epoch 3 (patience 2: the
    selector stops at epoch 5); the loss is NaN from epoch ``nan_from``,
    accumulated as :func:`train` does."""
    selector = Selector('val', 'max', patience=2)
    finite = torch.ones((), dtype=torch.bool)

    def step(epoch, observe):
        nonlocal finite
        loss = torch.tensor(math.nan if epoch >= nan_from else 1.0)
        finite = finite & loss.isfinite()
        observe({'val': torch.tensor(min(epoch, 3) / 10)})

    epochs = run_epochs(
        step,
        [selector],
        100,
        torch.device('cpu'),
        check_every,
        finite=lambda: finite,
    )
    return epochs, selector.result()


@pytest.mark.parametrize('check_every', [1, 25])
def test_a_nan_after_every_selector_stopped_is_no_divergence(check_every):
    # On a GPU (check_every 25) training goes on until the stop is read
    # back; a NaN loss in those epochs made a finished run a diverged one.
    epochs, result = stop_then_nan(check_every, nan_from=10)
    assert epochs == (5 if check_every == 1 else 25)
    assert result['epoch'] == 3 and result['stopped'] and result['last'] == 5


@pytest.mark.parametrize('check_every', [1, 25])
def test_a_nan_before_the_stop_is_a_divergence(check_every):
    with pytest.raises(Diverged, match=f'diverged at epoch {check_every}:'):
        stop_then_nan(check_every, nan_from=1)
    with pytest.raises(Diverged):  # the epoch of the stop still counts
        stop_then_nan(check_every, nan_from=5)
