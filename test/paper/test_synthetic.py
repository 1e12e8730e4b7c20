import math

import pytest
import torch

from gate_paper.synthetic import RESULTS, train_synthetic
from torch_geometric_gate.datasets import SelfSufficientER


def config(model, num_layers, max_epochs):
    return dict(
        dataset='er8',
        source='ours',
        model=model,
        num_layers=num_layers,
        seed=0,
        hidden=64,
        lr=0.005,
        max_epochs=max_epochs,
        stop_loss=1e-4,
    )


@pytest.mark.slow
def test_gate_switches_aggregation_off_and_records_its_epochs(tmp_path):
    torch.set_num_threads(1)
    dataset = SelfSufficientER(
        str(tmp_path), num_nodes=1000, edge_prob=0.01, num_classes=8, seed=0
    )
    result = train_synthetic(config('GATE', 5, 80), dataset[0], 8)
    facts = result.pop('provenance')
    assert tuple(result) == RESULTS
    assert facts['kernel'] == 'chunked' and facts['compiled'] is False
    assert facts['epochs_run'] == result['epochs_run']
    assert facts['dtype'] == 'float32' and facts['device'] == 'cpu'
    # GATE switches aggregation off and fits the task well before the loss
    # falls below 1e-4 (the run stops there).
    assert result['stopped_early'] is True
    assert result['min_train_loss'] < 1e-4
    first = result['first_full_train_epoch']
    assert 1 <= first <= result['epochs_run'] == result['min_loss_epoch']
    assert result['test_acc_at_first_full_train'] >= 0.9
    assert result['max_test_acc'] >= result['test_acc_at_min_loss']
    assert 1 <= result['max_test_acc_epoch'] <= result['epochs_run']
    assert min(result['final_alpha_vv_mean'][1:]) > 0.95
    assert result['final_train_acc'] == result['train_acc_at_min_loss'] == 1
    assert math.isfinite(result['wall_s'])


def test_histories_of_two_configurations_do_not_overwrite(tmp_path):
    # Issue 50, defect 4: `*_alpha_history.pt` and the plots were named
    # without the learning rate, hidden width, epochs...
    dataset = SelfSufficientER(
        str(tmp_path), num_nodes=50, edge_prob=0.1, num_classes=2, seed=0
    )
    plots = tmp_path / 'plots'
    for lr in (0.005, 0.01):
        c = {**config('GATE', 1, 2), 'lr': lr}
        train_synthetic(c, dataset[0], 2, plot_dir=str(plots))
    assert len(list(plots.glob('*_alpha_history.pt'))) == 2
    assert len(list(plots.glob('*_alpha_history.png'))) == 2
