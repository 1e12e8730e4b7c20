import math

import pytest
import torch
from sklearn.metrics import balanced_accuracy_score, roc_auc_score

from gate_paper.metrics import accuracy, as_python, metrics, roc_auc


def test_metrics_match_sklearn():
    gen = torch.Generator().manual_seed(0)
    out = torch.randn(50, 2, generator=gen)
    y = torch.randint(0, 2, (50,), generator=gen)
    out[:5] = out[5:10]  # ties
    index = torch.arange(3, 50)
    values = as_python(metrics(out, y, index))
    pred = out.argmax(-1)[index]
    score = out.softmax(-1)[index, 1]
    assert values['acc'] == pytest.approx((pred == y[index]).float().mean())
    assert values['bal_acc'] == pytest.approx(
        balanced_accuracy_score(y[index], pred)
    )
    assert values['roc_auc'] == pytest.approx(roc_auc_score(y[index], score))


@pytest.mark.parametrize('where', ['all', 'positives', 'one'])
def test_nan_logits_give_nan_metrics(where):
    # All-NaN logits scored the majority share as accuracy, a ROC AUC of
    # 0.571, or 1.0 with every positive NaN (issue 35, item 9).
    y = torch.tensor([0, 0, 0, 0, 1, 1, 0, 1])
    out = torch.randn(8, 2)
    if where == 'all':
        out[:] = math.nan
    elif where == 'positives':
        out[y == 1] = math.nan
    else:
        out[3, 1] = math.nan
    values = as_python(metrics(out, y, torch.arange(8)))
    assert all(math.isnan(v) for v in values.values()), values
    assert math.isnan(accuracy(out, y).item())
    assert math.isnan(roc_auc(out[:, 1], y).item())


def test_roc_auc_of_one_class_is_nan():
    assert math.isnan(roc_auc(torch.rand(5), torch.zeros(5)).item())


def test_roc_auc_of_confident_logits():
    # The score was the float32 softmax probability of class 1, which is
    # 1.0 for every logit gap above about 16.6: the most confident nodes
    # tied, and a model that ranks them well scored 0.5.
    y = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
    gap = torch.tensor([20.0, 22, 24, 26, 28, 21, 30, 32, 34, 36])
    out = torch.stack([torch.full_like(gap, -5.0), gap - 5.0], dim=1)
    value = as_python(metrics(out, y, torch.arange(10)))['roc_auc']
    assert roc_auc_score(y, gap) == pytest.approx(0.84)
    assert value == pytest.approx(0.84)
