r"""Metrics on the device, NaN-honest: a prediction from logits that hold a
NaN (a diverged model) scores NaN, never a plausible number."""

import math
from typing import Dict

import torch
from torch import Tensor


def _nan_if(bad: Tensor, value: Tensor) -> Tensor:
    return torch.where(bad, torch.full_like(value, math.nan), value)


def accuracy(out: Tensor, y: Tensor) -> Tensor:
    r"""The share of rows of ``out`` whose argmax is ``y``; NaN if ``out``
    holds a NaN (the argmax of a NaN row is meaningless)."""
    acc = (out.argmax(dim=-1) == y).float().mean()
    return _nan_if(out.isnan().any(), acc)


def roc_auc(score: Tensor, target: Tensor) -> Tensor:
    r"""The area under the ROC curve of ``score`` for ``target == 1``
    against the rest, from the ranks of the scores (tied scores share their
    mean rank), the Mann-Whitney statistic: equal to sklearn's
    ``roc_auc_score``. A float64 scalar on the device of ``score``, with no
    host synchronisation; NaN if ``target`` holds one class only or
    ``score`` holds a NaN."""
    n = score.numel()
    sorted_score, order = score.detach().sort()
    new = torch.ones(n, dtype=torch.bool, device=score.device)
    new[1:] = sorted_score[1:] != sorted_score[:-1]
    group = new.long().cumsum(0) - 1
    rank = torch.arange(1, n + 1, dtype=torch.float64, device=score.device)
    first = torch.full_like(rank, math.inf).scatter_reduce(
        0, group, rank, 'amin'
    )
    last = torch.zeros_like(rank).scatter_reduce(0, group, rank, 'amax')
    mean_rank = ((first + last) / 2)[group]
    positive = (target[order] == 1).double()
    num_pos = positive.sum()
    num_neg = n - num_pos
    rank_sum = (mean_rank * positive).sum()
    auc = (rank_sum - num_pos * (num_pos + 1) / 2) / (num_pos * num_neg)
    return _nan_if(score.isnan().any(), auc)


def balanced_accuracy(pred: Tensor, y: Tensor, num_classes: int) -> Tensor:
    r"""The mean recall over the classes present in ``y`` (sklearn's
    ``balanced_accuracy_score``), a float64 scalar on the device."""
    correct = (pred == y).double()
    support = torch.zeros(num_classes, dtype=torch.float64, device=y.device)
    support = support.scatter_add(0, y, torch.ones_like(correct))
    hits = torch.zeros_like(support).scatter_add(0, y, correct)
    return torch.nanmean(hits / support)


#: The score whose ROC AUC :func:`metrics` gives (a binary run's file
#: records it: runs written before it did scored the float32 probability of
#: class 1).
ROC_AUC_SCORE = 'logit difference (float64)'


def metrics(out: Tensor, y: Tensor, index: Tensor) -> Dict[str, Tensor]:
    r"""Accuracy, balanced accuracy (from the argmax labels; what the
    GATE authors' scripts called AUROC) and, for two classes, the ROC AUC
    of the logit difference ``out[:, 1] - out[:, 0]`` in float64 (else
    NaN): it ranks the nodes as the softmax probability of class 1 does,
    without that probability's rounding to 1.0 (in float32 above a gap of
    about 16.6), which tied the most confident nodes. Of the nodes
    ``index`` (an index tensor: no host synchronisation), as scalars on the
    device; all NaN if the logits of those nodes hold a NaN."""
    out, y = out.detach().index_select(0, index), y.index_select(0, index)
    bad = out.isnan().any()
    result = {
        'acc': accuracy(out, y),
        'bal_acc': _nan_if(
            bad, balanced_accuracy(out.argmax(dim=-1), y, out.size(-1))
        ),
        'roc_auc': torch.full(
            (), math.nan, dtype=torch.float64, device=out.device
        ),
    }
    if out.size(-1) == 2:
        score = out[:, 1].double() - out[:, 0].double()
        result['roc_auc'] = roc_auc(score, y)
    return result


def as_python(values: Dict[str, Tensor]) -> Dict[str, float]:
    r"""The values of a dict of device scalars, with one synchronisation."""
    if not values:
        return {}
    keys = list(values)
    stacked = torch.stack([values[k].double().reshape(()) for k in keys])
    return dict(zip(keys, stacked.cpu().tolist(), strict=True))
