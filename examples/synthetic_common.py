r"""Shared code of the paper's synthetic experiments (Sec. 5.1, Appendix C):
the four architectures, the training loop with the paper's stopping rule and
metrics, and the table writers. Used by ``self_sufficient.py`` and
``neighbor_dependent.py``; not a public API.
"""

import csv
import math
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.nn import GATv2Conv

from torch_geometric_gate.nn.inits import looks_linear_orthogonal_
from torch_geometric_gate.nn.models import GATE
from torch_geometric_gate.utils import (
    SelfAttentionRecorder,
    plot_self_attention_histogram,
    plot_self_attention_history,
    self_loop_attention,
)

MODELS = ('GAT_S', 'GAT', 'GATE_S', 'GATE')


def _position(i: int, num_layers: int) -> str:
    if num_layers == 1:
        return 'only'
    if i == 0:
        return 'first'
    return 'last' if i == num_layers - 1 else 'hidden'


class GATv2Net(torch.nn.Module):
    r"""The paper's GAT / GAT_S baseline: PyG's ``GATv2Conv`` layers with
    LeakyReLU(0.2) in the score, no bias, one head, ReLU between layers, the
    last layer emitting the logits; looks-linear orthogonal ``lin_l`` /
    ``lin_r`` (shared for GAT_S) and a Xavier-normal attention vector.
    """

    def __init__(
        self,
        in_channels,
        hidden_channels,
        out_channels,
        num_layers,
        share_weights=False,
    ):
        super().__init__()
        sizes = [in_channels] + [hidden_channels] * (num_layers - 1)
        sizes += [out_channels]
        self.convs = torch.nn.ModuleList(
            GATv2Conv(
                i,
                o,
                negative_slope=0.2,
                bias=False,
                share_weights=share_weights,
            )
            for i, o in zip(sizes[:-1], sizes[1:], strict=True)
        )
        self.reset_parameters()

    def reset_parameters(self):
        num_layers = len(self.convs)
        for i, conv in enumerate(self.convs):
            conv.reset_parameters()
            for lin in {
                id(conv.lin_l): conv.lin_l,
                id(conv.lin_r): conv.lin_r,
            }.values():
                looks_linear_orthogonal_(lin.weight, _position(i, num_layers))
            torch.nn.init.xavier_normal_(conv.att)

    def forward_with_self_attention(self, x, edge_index):
        alphas = []
        for i, conv in enumerate(self.convs):
            num_nodes = x.size(0)
            x, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
            alphas.append(self_loop_attention(ei, alpha, num_nodes))
            if i < len(self.convs) - 1:
                x = x.relu()
        return x, alphas


def build_model(name, in_channels, hidden_channels, out_channels, num_layers):
    if name in ('GAT', 'GAT_S'):
        return GATv2Net(
            in_channels,
            hidden_channels,
            out_channels,
            num_layers,
            share_weights=name == 'GAT_S',
        )
    if name in ('GATE', 'GATE_S'):
        return GATE(
            in_channels,
            hidden_channels,
            num_layers,
            out_channels,
            share_weights=name == 'GATE_S',
            init='looks_linear',
        )
    raise ValueError(f'Unknown model {name!r}; expected one of {MODELS}')


@dataclass
class RunResult:
    dataset: str
    model: str
    num_layers: int
    seed: int
    min_loss_epoch: int  # 1-based
    min_train_loss: float
    test_acc_at_min_loss: float
    train_acc_at_min_loss: float
    final_train_acc: float
    final_test_acc: float
    epochs_run: int
    stopped_early: bool
    wall_s: float
    final_alpha_vv_mean: List[float] = field(default_factory=list)


def train_run(
    model: torch.nn.Module,
    data: Data,
    dataset: str,
    name: str,
    num_layers: int,
    seed: int,
    max_epochs: int,
    lr: float,
    stop_loss: float,
    plot_dir: Optional[str] = None,
    pbar=None,
) -> RunResult:
    r"""Full-batch Adam without weight decay or dropout, up to
    ``max_epochs`` epochs, stopping once the training loss falls below
    ``stop_loss`` (Appendix C). The loss, the accuracies and alpha_vv of an
    epoch come from that epoch's training forward pass (before its update),
    so recording them costs no second forward. Returns the paper's Table 1
    metric: the test accuracy at the epoch of minimum training loss.
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    recorder = SelfAttentionRecorder()
    best = (math.inf, 0, 0.0, 0.0)
    train_mask, test_mask, y = data.train_mask, data.test_mask, data.y
    start = time.perf_counter()
    epoch = 0
    for epoch in range(1, max_epochs + 1):
        model.train()
        optimizer.zero_grad()
        out, alphas = model.forward_with_self_attention(
            data.x, data.edge_index
        )
        loss = F.cross_entropy(out[train_mask], y[train_mask])
        with torch.no_grad():
            pred = out.argmax(dim=-1)
            train_acc = float(
                (pred[train_mask] == y[train_mask]).float().mean()
            )
            test_acc = float((pred[test_mask] == y[test_mask]).float().mean())
        recorder.record(alphas, epoch)
        loss_value = float(loss.detach())
        if loss_value < best[0]:
            best = (loss_value, epoch, test_acc, train_acc)
        if pbar is not None and (epoch % 50 == 0 or epoch == 1):
            pbar.set_postfix(
                run=f'{dataset} L={num_layers} {name}',
                epoch=epoch,
                loss=f'{loss_value:.1e}',
                train=f'{train_acc:.3f}',
                refresh=True,
            )
        if loss_value < stop_loss:
            break
        loss.backward()
        optimizer.step()
    wall = time.perf_counter() - start

    if plot_dir is not None:
        os.makedirs(plot_dir, exist_ok=True)
        stem = os.path.join(
            plot_dir, f'{dataset}_L{num_layers}_{name}_seed{seed}'
        )
        title = f'{name}, {dataset}, L={num_layers}, seed {seed}'
        plot_self_attention_history(
            recorder, stem + '_alpha_history.png', title=title
        )
        plot_self_attention_histogram(
            recorder, stem + '_alpha_final.png', title=title
        )
        torch.save(recorder.state_dict(), stem + '_alpha_history.pt')

    return RunResult(
        dataset=dataset,
        model=name,
        num_layers=num_layers,
        seed=seed,
        min_loss_epoch=best[1],
        min_train_loss=best[0],
        test_acc_at_min_loss=best[2],
        train_acc_at_min_loss=best[3],
        final_train_acc=train_acc,
        final_test_acc=test_acc,
        epochs_run=epoch,
        stopped_early=loss_value < stop_loss,
        wall_s=wall,
        final_alpha_vv_mean=[float(a.detach().mean()) for a in alphas],
    )


def write_csv(results: List[RunResult], path: str):
    rows = [asdict(r) for r in results]
    for row in rows:
        row['final_alpha_vv_mean'] = ' '.join(
            f'{v:.4f}' for v in row['final_alpha_vv_mean']
        )
    with open(path, 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def mean_ci95(values: List[float]):
    r"""Mean and half-width of the two-sided 95% confidence interval of the
    mean with the t-distribution (``n - 1`` degrees of freedom).
    """
    from scipy.stats import t

    arr = np.asarray(values, dtype=float)
    if arr.size < 2:
        return float(arr.mean()), float('nan')
    half = t.ppf(0.975, arr.size - 1) * arr.std(ddof=1) / math.sqrt(arr.size)
    return float(arr.mean()), float(half)


def markdown_table(header: List[str], rows: List[List[str]]) -> str:
    lines = [
        '| ' + ' | '.join(header) + ' |',
        '| ' + ' | '.join('---' for _ in header) + ' |',
    ]
    lines += ['| ' + ' | '.join(row) + ' |' for row in rows]
    return '\n'.join(lines) + '\n'


def alpha_summary(results: List[RunResult]) -> Dict[str, str]:
    return {
        f'{r.dataset} L={r.num_layers} {r.model} seed {r.seed}': ' '.join(
            f'{v:.2f}' for v in r.final_alpha_vv_mean
        )
        for r in results
    }
