import os
from typing import Optional, Sequence, Union

import numpy as np

from torch_geometric_gate.utils._plotting import import_figure, save
from torch_geometric_gate.utils._plotting import layer_names as _names
from torch_geometric_gate.utils.self_attention_recorder import (
    SelfAttentionRecorder,
)

# Quantile bands from the widest (lightest) to the narrowest (darkest):
_BANDS = (
    ('min', 'max', 'min-max'),
    ('q10', 'q90', '10-90%'),
    ('q20', 'q80', '20-80%'),
    ('q30', 'q70', '30-70%'),
    ('q40', 'q60', '40-60%'),
)


def plot_self_attention_history(
    recorder: SelfAttentionRecorder,
    path: Union[str, os.PathLike, None] = None,
    title: Optional[str] = None,
    layer_names: Optional[Sequence[str]] = None,
    color: str = 'tab:blue',
):
    r"""Plots the distribution of the self-attention :math:`\alpha_{v,v}`
    against the training epoch, one panel per layer, in the style of the
    GATE paper's Figures 3-5: nested shaded bands between the minimum and
    the maximum and between the :math:`10/90\%`, :math:`20/80\%`,
    :math:`30/70\%` and :math:`40/60\%` deciles, the median as a solid line
    and the mean as a dashed one. :math:`\alpha_{v,v} = 1` means that the
    layer ignores a node's neighbors. The records are drawn in the order of
    their epochs, whatever the order in which they were recorded. The
    :math:`\alpha_{v,v}` axis spans :math:`[0, 1]`, widened to take the
    values recorded (after attention dropout, in training mode, the kept
    weights are scaled by :math:`1 / (1 - p)` and may exceed :math:`1`).

    Requires :obj:`matplotlib` (imported only when called).

    Args:
        recorder (SelfAttentionRecorder): The recorded summaries.
        path (str or os.PathLike, optional): If given, saves the figure
            to this file (not a directory), or to a binary file object as
            PNG; a file's extension (:obj:`.png`,
            :obj:`.pdf`, ...) picks the format. (default: :obj:`None`)
        title (str, optional): A title over all panels.
            (default: :obj:`None`)
        layer_names (list of str, optional): One panel title per layer.
            (default: :obj:`"layer 1"`, :obj:`"layer 2"`, ...)
        color (str, optional): The matplotlib color of the bands.
            (default: :obj:`"tab:blue"`)

    :rtype: :class:`matplotlib.figure.Figure`

    Example:
        >>> import torch
        >>> from torch_geometric_gate.utils import (
        ...     SelfAttentionRecorder, plot_self_attention_history)
        >>> recorder = SelfAttentionRecorder()
        >>> for epoch in range(10):
        ...     recorder.record([torch.rand(50, 1) ** (1 / (epoch + 1))])
        >>> fig = plot_self_attention_history(recorder)
        >>> len(fig.axes)
        1
    """
    if not isinstance(recorder, SelfAttentionRecorder):
        raise TypeError(
            f"'recorder' must be a SelfAttentionRecorder (got "
            f'{type(recorder).__name__})'
        )
    if len(recorder) == 0:
        raise ValueError('The recorder holds no records to plot')
    Figure = import_figure()
    num_layers = recorder.num_layers
    names = _names(num_layers, layer_names)
    # In epoch order (records may come in any order, as resumed runs or
    # evaluations give them), so that no band or line runs backwards:
    order = recorder.epochs.argsort(stable=True)
    epochs = recorder.epochs[order].numpy()

    if len(order) == 1:
        # One point draws neither a band nor a line: spread the record over
        # an epoch's width around its epoch.
        epochs = epochs + np.array([-0.5, 0.5])
        order = order.repeat(2)

    def stat(name, layer):
        return recorder.stat(name, layer)[order].numpy()

    # [0, 1], widened to the values recorded: weights after attention
    # dropout (training mode) exceed 1, and were cut off.
    history = recorder.history()
    stats = SelfAttentionRecorder.STATS
    low = min(-0.02, float(history[..., stats.index('min')].min()) - 0.02)
    high = max(1.02, float(history[..., stats.index('max')].max()) + 0.02)

    fig = Figure(figsize=(max(3.0 * num_layers, 6.5) + 0.5, 3.0))
    axes = fig.subplots(1, num_layers, sharey=True, squeeze=False)[0]
    for i, ax in enumerate(axes):
        for j, (lo, hi, label) in enumerate(_BANDS):
            ax.fill_between(
                epochs,
                stat(lo, i),
                stat(hi, i),
                color=color,
                alpha=0.15 + 0.12 * j,
                linewidth=0,
                label=label,
            )
        ax.plot(
            epochs,
            stat('median', i),
            color='black',
            linewidth=1.0,
            label='median',
        )
        ax.plot(
            epochs,
            stat('mean', i),
            color='tab:red',
            linewidth=1.0,
            linestyle='--',
            label='mean',
        )
        ax.set_title(names[i])
        ax.set_xlabel('epoch')
        ax.set_ylim(low, high)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(r'$\alpha_{vv}$')
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc='lower center',
        ncol=len(labels),
        fontsize='small',
        frameon=False,
    )
    if title is not None:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    save(fig, path)
    return fig
