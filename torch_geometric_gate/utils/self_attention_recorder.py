from typing import List, Optional, Sequence

import torch
from torch import Tensor

from torch_geometric_gate.utils._plotting import check_alpha_list
from torch_geometric_gate.utils._validation import as_int

_DECILES = tuple(round(0.1 * i, 1) for i in range(1, 10))


def _quantiles(values: Tensor, qs: Tensor) -> Tensor:
    # Linear interpolation as `torch.quantile`, without its input-size limit.
    sorted_values = values.sort().values
    pos = qs * (sorted_values.numel() - 1)
    lo = pos.floor().long()
    hi = pos.ceil().long()
    frac = (pos - lo.to(pos.dtype)).to(sorted_values.dtype)
    return torch.lerp(sorted_values[lo], sorted_values[hi], frac)


class SelfAttentionRecorder:
    r"""Records, per layer and per epoch, a summary of the distribution of
    the self-attention :math:`\alpha_{v,v}` over the nodes, as the GATE
    paper's Figures 3-5 show it.

    Only the summaries are kept: per call of :meth:`record`, one row of
    :obj:`len(SelfAttentionRecorder.STATS)` (:obj:`13`) numbers per layer,
    the mean, the standard deviation, the minimum, the maximum and the nine
    deciles (:math:`10\%, \ldots, 90\%`, linearly interpolated as in
    :func:`torch.quantile`). Rows live in a CPU buffer that grows by
    doubling, so :obj:`10000` epochs of a :obj:`5`-layer network take
    :obj:`2.6` MB of summaries (at most twice that while the buffer grows),
    whatever the number of nodes. With several heads,
    the summary pools all heads of a layer. Optionally, the raw
    :math:`\alpha_{v,v}` of the last call are kept (:obj:`keep_last=True`)
    for :func:`~torch_geometric_gate.utils.plot_self_attention_histogram`.

    Args:
        keep_last (bool, optional): If set to :obj:`True`, keeps a detached
            CPU copy of the :math:`\alpha_{v,v}` passed to the last call of
            :meth:`record` in :attr:`~SelfAttentionRecorder.last`.
            (default: :obj:`True`)

    Example:
        >>> import torch
        >>> from torch_geometric_gate.utils import SelfAttentionRecorder
        >>> recorder = SelfAttentionRecorder()
        >>> for epoch in range(3):
        ...     alpha_vv = [torch.full((5, 1), 0.5), torch.rand(5, 1)]
        ...     recorder.record(alpha_vv, epoch)
        >>> recorder.num_layers, len(recorder)
        (2, 3)
        >>> recorder.history(layer=0)[:, :4]  # mean, std, min, max
        tensor([[0.5000, 0.0000, 0.5000, 0.5000],
                [0.5000, 0.0000, 0.5000, 0.5000],
                [0.5000, 0.0000, 0.5000, 0.5000]])
        >>> recorder.stat('median', layer=0)
        tensor([0.5000, 0.5000, 0.5000])
    """

    #: The names of the recorded statistics, in the order of
    #: :meth:`history`'s columns.
    STATS = ('mean', 'std', 'min', 'max') + tuple(
        f'q{int(q * 100)}' for q in _DECILES
    )

    def __init__(self, keep_last: bool = True):
        self.keep_last = keep_last
        self._buffer: Optional[Tensor] = None  # [capacity, layers, stats]
        self._epochs: Optional[Tensor] = None  # [capacity]
        self._size = 0
        self._qs: Optional[Tensor] = None
        #: The :math:`\alpha_{v,v}` of the last call of :meth:`record` (with
        #: :obj:`keep_last=True`), a detached CPU copy per layer; else
        #: :obj:`None`.
        self.last: Optional[List[Tensor]] = None

    @property
    def num_layers(self) -> int:
        r"""The number of layers recorded (:obj:`0` before any record)."""
        return 0 if self._buffer is None else self._buffer.size(1)

    def __len__(self) -> int:
        return self._size

    @torch.no_grad()
    def record(self, alpha_vv: Sequence[Tensor], epoch: Optional[int] = None):
        r"""Summarises the self-attention of one epoch.

        Args:
            alpha_vv (list of torch.Tensor): One tensor per layer, of shape
                :obj:`[num_nodes]` or :obj:`[num_nodes, heads]`, e.g. the
                second output of
                :meth:`~torch_geometric_gate.nn.models.GATE.forward_with_self_attention`.
            epoch (int, optional): The epoch of this record. Defaults to the
                number of records so far. (default: :obj:`None`)

        Raises:
            TypeError: If a layer's :math:`\alpha_{v,v}` is not a dense
                floating-point tensor.
            ValueError: If a layer's :math:`\alpha_{v,v}` holds a NaN (or an
                infinite value), the sign that training diverged. Nothing
                of that call is recorded: a summary of the finite values
                only would mix a NaN mean with finite quantiles.
        """
        alpha_vv = check_alpha_list(alpha_vv)
        for i, a in enumerate(alpha_vv):
            # Integer, boolean or complex values would be summarised
            # silently (complex ones by their real part alone):
            if a.layout != torch.strided or not a.is_floating_point():
                raise TypeError(
                    f'Expected alpha_vv of layer {i} as a dense '
                    f'floating-point tensor of attention weights (got '
                    f'{a.dtype}, {a.layout})'
                )
        if self._buffer is not None and len(alpha_vv) != self.num_layers:
            raise ValueError(
                f'Expected alpha_vv of {self.num_layers} layers '
                f'as before (got {len(alpha_vv)})'
            )
        epoch = self._size if epoch is None else as_int(epoch, 'epoch')

        rows = []
        for i, a in enumerate(alpha_vv):
            values = a.detach().reshape(-1).float()
            num_bad = int((~torch.isfinite(values)).sum())
            if num_bad > 0:
                raise ValueError(
                    f'alpha_vv of layer {i} at epoch {epoch} holds '
                    f'{num_bad} NaN or infinite values (of {values.numel()}):'
                    f' training diverged; '
                    f'nothing was recorded for this epoch'
                )
            if self._qs is None or self._qs.device != values.device:
                self._qs = torch.tensor(_DECILES, device=values.device)
            std = values.std() if values.numel() > 1 else values.new_zeros(())
            stats = torch.stack(
                [values.mean(), std, values.min(), values.max()]
            )
            rows.append(torch.cat([stats, _quantiles(values, self._qs)]))
        row = torch.stack(rows).cpu()

        if self._buffer is None:
            self._buffer = row.new_empty(16, *row.size())
            self._epochs = torch.empty(16, dtype=torch.long)
        elif self._size == self._buffer.size(0):
            self._buffer = torch.cat(
                [self._buffer, torch.empty_like(self._buffer)]
            )
            self._epochs = torch.cat(
                [self._epochs, torch.empty_like(self._epochs)]
            )
        self._buffer[self._size] = row
        self._epochs[self._size] = epoch
        self._size += 1

        if self.keep_last:
            self.last = [a.detach().cpu().clone() for a in alpha_vv]

    @property
    def epochs(self) -> Tensor:
        r"""The epochs recorded, as a :obj:`[num_records]` tensor (a
        copy)."""
        if self._epochs is None:
            return torch.empty(0, dtype=torch.long)
        return self._epochs[: self._size].clone()

    def history(self, layer: Optional[int] = None) -> Tensor:
        r"""Returns the recorded summaries, as a :obj:`[num_records,
        num_layers, 13]` tensor, or :obj:`[num_records, 13]` for one
        :obj:`layer`; columns as in :attr:`STATS`. The tensor is a copy:
        changing it leaves the records as they are.
        """
        if self._buffer is None:
            raise ValueError('Nothing recorded yet')
        out = self._buffer[: self._size]
        if layer is not None:
            out = out[:, self._check_layer(layer)]
        return out.clone()

    def stat(self, name: str, layer: int) -> Tensor:
        r"""Returns one statistic of one layer over the records: a name of
        :attr:`STATS`, or :obj:`'median'` (the :obj:`'q50'` column).
        """
        name = 'q50' if name == 'median' else name
        if name not in self.STATS:
            raise ValueError(
                f'Unknown statistic {name!r}; expected one of '
                f'{self.STATS + ("median",)}'
            )
        return self.history(layer)[:, self.STATS.index(name)]

    def _check_layer(self, layer: int) -> int:
        layer = as_int(layer, 'layer')
        if not -self.num_layers <= layer < self.num_layers:
            raise ValueError(
                f"'layer' must be in [-{self.num_layers}, {self.num_layers}) "
                f'(negative counts from the last layer; got {layer})'
            )
        return layer

    def state_dict(self) -> dict:
        r"""Returns the records as a dictionary of tensors (for
        :func:`torch.save`; :meth:`load_state_dict` restores them).
        """
        return {
            'stats': list(self.STATS),
            'epochs': self.epochs,
            'history': self.history()
            if self._buffer is not None
            else torch.empty(0),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        r"""Restores the records of :meth:`state_dict` (e.g. read back with
        :func:`torch.load`), replacing any held; recording may go on.
        :attr:`last` is not part of the state and is reset to :obj:`None`.
        """
        if not isinstance(state_dict, dict) or not {
            'stats',
            'epochs',
            'history',
        } <= set(state_dict):
            raise ValueError(
                'Expected the dictionary of SelfAttentionRecorder.state_dict()'
                " with keys 'stats', 'epochs' and 'history'"
            )
        if list(state_dict['stats']) != list(self.STATS):
            raise ValueError(
                f'Expected the statistics {list(self.STATS)} (got '
                f'{list(state_dict["stats"])})'
            )
        epochs = torch.as_tensor(state_dict['epochs'], dtype=torch.long)
        history = torch.as_tensor(state_dict['history']).float()
        if epochs.numel() == 0 and history.numel() == 0:
            self._buffer, self._epochs, self._size = None, None, 0
        elif (
            epochs.dim() != 1
            or history.dim() != 3
            or history.size(0) != epochs.numel()
            or history.size(2) != len(self.STATS)
        ):
            raise ValueError(
                f"Expected 'history' of shape [num_records, num_layers, "
                f"{len(self.STATS)}] and 'epochs' of shape [num_records] "
                f'(got {list(history.size())} and {list(epochs.size())})'
            )
        else:
            self._buffer = history.cpu().clone()
            self._epochs = epochs.cpu().clone()
            self._size = epochs.numel()
        self.last = None

    def __repr__(self) -> str:
        return (
            f'{self.__class__.__name__}(num_layers={self.num_layers}, '
            f'num_records={len(self)})'
        )
