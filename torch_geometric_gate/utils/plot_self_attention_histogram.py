import os
from typing import List, Optional, Sequence, Union

import torch
from torch import Tensor

from torch_geometric_gate.utils._plotting import (
    check_alpha_list,
    import_figure,
    save,
)
from torch_geometric_gate.utils._plotting import layer_names as _names
from torch_geometric_gate.utils._validation import as_int
from torch_geometric_gate.utils.self_attention_recorder import (
    SelfAttentionRecorder,
)

# Rounding may put a weight a little outside [0, 1]; it is clamped.
_TOLERANCE = 1e-3


def plot_self_attention_histogram(
    alpha_vv: Union[List[Tensor], SelfAttentionRecorder],
    path: Union[str, os.PathLike, None] = None,
    bins: int = 20,
    title: Optional[str] = None,
    layer_names: Optional[Sequence[str]] = None,
    color: str = 'tab:blue',
):
    r"""Plots the histogram of the self-attention :math:`\alpha_{v,v}` over
    the nodes, one panel per layer, on :math:`[0, 1]`, with the mean marked.
    Typically the values after training: the second output of
    :meth:`~torch_geometric_gate.nn.models.GATE.forward_with_self_attention`,
    or a :class:`~torch_geometric_gate.utils.SelfAttentionRecorder` (its
    :attr:`~torch_geometric_gate.utils.SelfAttentionRecorder.last`
    values). With several heads, all heads of a layer are
    pooled.

    Requires :obj:`matplotlib` (imported only when called).

    Args:
        alpha_vv (list of torch.Tensor or SelfAttentionRecorder): One
            :obj:`[num_nodes]` or :obj:`[num_nodes, heads]` tensor per layer.
        path (str or os.PathLike, optional): If given, saves the figure
            to this file (not a directory), or to a binary file object as
            PNG; a file's extension picks the format.
            (default: :obj:`None`)
        bins (int, optional): The number of bins on :math:`[0, 1]`.
            (default: :obj:`20`)
        title (str, optional): A title over all panels.
            (default: :obj:`None`)
        layer_names (list of str, optional): One panel title per layer.
            (default: :obj:`"layer 1"`, :obj:`"layer 2"`, ...)
        color (str, optional): The matplotlib color of the bars.
            (default: :obj:`"tab:blue"`)

    :rtype: :class:`matplotlib.figure.Figure`

    Raises:
        ValueError: If a layer's :math:`\alpha_{v,v}` holds a NaN or an
            infinite value (training diverged), as
            :meth:`SelfAttentionRecorder.record` does, or a value outside
            :math:`[0, 1]` (beyond rounding, :obj:`1e-3`).

    Example:
        >>> import torch
        >>> from torch_geometric_gate.utils import (
        ...     plot_self_attention_histogram)
        >>> fig = plot_self_attention_histogram([torch.rand(50, 1)] * 2)
        >>> len(fig.axes)
        2
    """
    if isinstance(alpha_vv, SelfAttentionRecorder):
        if alpha_vv.last is None:
            raise ValueError(
                'The recorder holds no last values (record at '
                "least once with 'keep_last=True')"
            )
        alpha_vv = alpha_vv.last
    alpha_vv = check_alpha_list(alpha_vv)
    for i, a in enumerate(alpha_vv):
        # The histogram would drop them and the mean would read 'nan'.
        num_bad = int((~torch.isfinite(a.detach())).sum())
        if num_bad > 0:
            raise ValueError(
                f'alpha_vv of layer {i} holds {num_bad} NaN or infinite '
                f'values (of {a.numel()}): training diverged; expected '
                f'finite values in [0, 1]'
            )
        # Values outside [0, 1] (scores or logits, not attention weights)
        # would pile up in the edge bins, the mean line off the axes.
        low, high = float(a.detach().min()), float(a.detach().max())
        if low < -_TOLERANCE or high > 1 + _TOLERANCE:
            raise ValueError(
                f'alpha_vv of layer {i} holds values outside [0, 1] '
                f'(from {low:.4g} to {high:.4g}); expected the attention '
                f'weights alpha_vv in [0, 1], not attention scores or logits'
                + (
                    ' (a training step with attention dropout scales the '
                    'kept weights by 1 / (1 - p): record them in eval mode)'
                    if high > 1
                    else ''
                )
            )
    bins = as_int(bins, 'bins', 1)  # NumPy integers too, as Python ints
    Figure = import_figure()
    num_layers = len(alpha_vv)
    names = _names(num_layers, layer_names)

    fig = Figure(figsize=(3.0 * num_layers + 0.5, 2.6))
    axes = fig.subplots(1, num_layers, sharey=True, squeeze=False)[0]
    for i, ax in enumerate(axes):
        values = alpha_vv[i].detach().reshape(-1).float().cpu()
        counts = torch.histc(
            values.clamp(0.0, 1.0), bins=bins, min=0.0, max=1.0
        )
        frac = (counts / values.numel()).numpy()
        edges = torch.linspace(0.0, 1.0, bins + 1).numpy()
        ax.bar(
            edges[:-1],
            frac,
            width=1.0 / bins,
            align='edge',
            color=color,
            edgecolor='white',
            linewidth=0.5,
        )
        mean = float(values.mean())
        ax.axvline(
            mean,
            color='tab:red',
            linestyle='--',
            linewidth=1.0,
            label=f'mean {mean:.3f}',
        )
        ax.set_xlim(0.0, 1.0)
        ax.set_title(names[i])
        ax.set_xlabel(r'$\alpha_{vv}$')
        ax.legend(fontsize='small', frameon=False, loc='upper center')
    axes[0].set_ylabel('fraction of nodes')
    if title is not None:
        fig.suptitle(title)
    fig.tight_layout()
    save(fig, path)
    return fig
