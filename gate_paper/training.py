r"""The one training loop of the paper's scripts: epoch selection
(:class:`Selector`), the epoch loop (:func:`run_epochs`) and its
full-batch training step (:func:`train`), which both recipes use.

A run whose loss or self-attention turns NaN or infinite raises
:class:`Diverged`; the runner records it as a diverged run and goes on.
"""

import math
from typing import Callable, Dict, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from gate_paper.metrics import as_python
from gate_paper.runner import Diverged

__all__ = ['Diverged', 'Selector', 'mask_index', 'run_epochs', 'train']


class Selector:
    r"""Chooses one epoch of a run, on the device: the first epoch whose
    ``values[key]`` is strictly better (``better='max'`` or ``'min'``) than
    that of every earlier epoch, where the loop has reached it. A NaN value
    is never better, so a diverged epoch is never chosen. It keeps all
    ``values`` of that epoch (``at``) and, with ``state_of`` a module, a copy
    of its state then. It stops (freezes) after ``patience`` epochs
    without improvement, or after an epoch whose value is below
    ``stop_below``. ``better='first'`` selects the first epoch whose value
    equals ``target``, ``better='last'`` the last epoch the loop ran.

    Nothing here reads a value back to the host, so that a run on a GPU
    does not wait for it every epoch; :meth:`result` does once.
    """

    def __init__(
        self,
        key: str,
        better: str = 'max',
        patience: Optional[int] = None,
        stop_below: Optional[float] = None,
        state_of: Optional[torch.nn.Module] = None,
        target: float = 1.0,
    ):
        if better not in ('max', 'min', 'first', 'last'):
            raise ValueError(
                f"better must be 'max', 'min', 'first' or 'last', got "
                f'{better!r}'
            )
        self.key, self.better, self.target = key, better, target
        self.patience, self.stop_below = patience, stop_below
        self.state_of = state_of
        self.stops = patience is not None or stop_below is not None
        self._ready = False

    def _start(self, values: Dict[str, Tensor]):
        device = values[self.key].device
        start = math.inf if self.better == 'min' else -math.inf
        self.best = torch.tensor(start, dtype=torch.float64, device=device)
        zero = torch.zeros((), dtype=torch.long, device=device)
        self.epoch, self.bad, self.last = zero, zero, zero
        self.found = torch.zeros((), dtype=torch.bool, device=device)
        self.stopped = self.found
        self.at = {
            k: torch.full_like(v.detach(), math.nan) for k, v in values.items()
        }
        self.state = (
            None
            if self.state_of is None
            else {
                k: v.detach().clone()
                for k, v in self.state_of.state_dict().items()
            }
        )
        self._ready = True

    def update(self, epoch: int, values: Dict[str, Tensor], running: Tensor):
        if not self._ready:
            self._start(values)
        active = running & ~self.stopped
        value = values[self.key].detach().double()
        if self.better == 'max':
            improved = value > self.best
        elif self.better == 'min':
            improved = value < self.best
        elif self.better == 'first':
            improved = ~self.found & (value == self.target)
        else:
            improved = torch.ones_like(active)
        improved = active & improved
        self.found = self.found | improved
        self.best = torch.where(improved, value, self.best)
        self.epoch = torch.where(improved, epoch, self.epoch)
        self.last = torch.where(active, epoch, self.last)
        self.at = {
            k: torch.where(improved, v.detach(), self.at[k])
            for k, v in values.items()
        }
        if self.state is not None:
            for k, v in self.state_of.state_dict().items():
                self.state[k].copy_(torch.where(improved, v, self.state[k]))
        if self.patience is not None:
            self.bad = torch.where(
                active, torch.where(improved, 0, self.bad + 1), self.bad
            )
            self.stopped = self.stopped | (
                active & (self.bad >= self.patience)
            )
        if self.stop_below is not None:
            self.stopped = self.stopped | (active & (value < self.stop_below))

    def result(self) -> dict:
        r"""``epoch`` (1-based; 0: none selected), ``value``, ``stopped``
        (by its rule), ``last`` (the last epoch it saw) and the values
        ``at`` the selected epoch, as Python numbers."""
        if not self._ready:
            return dict(epoch=0, value=math.nan, stopped=False, last=0, at={})
        head = as_python(
            dict(
                epoch=self.epoch,
                value=self.best,
                stopped=self.stopped,
                last=self.last,
            )
        )
        if head['epoch'] == 0:  # nothing selected: no value either
            head['value'] = math.nan
        return dict(
            epoch=int(head['epoch']),
            value=head['value'],
            stopped=bool(head['stopped']),
            last=int(head['last']),
            at=as_python(self.at),
        )

    def load_into(self, module: torch.nn.Module):
        r"""Loads the state of the selected epoch into ``module``."""
        module.load_state_dict(self.state)


def run_epochs(
    step: Callable[[int, Callable[[Dict[str, Tensor]], None]], None],
    selectors: Sequence[Selector],
    max_epochs: int,
    device: torch.device,
    check_every: int = 1,
    pbar=None,
    label: str = '',
    finite: Optional[Callable[[], Tensor]] = None,
) -> int:
    r"""The epoch loop: ``step(epoch, observe)`` runs one epoch
    (full-batch, mini-batch or distributed) and calls ``observe(values)``
    with the epoch's values (device scalars) where it measures them, before
    its parameter update if a selector keeps the model's state. The
    ``selectors`` see them; the loop ends after ``max_epochs`` epochs or
    once every selector with a stopping rule has stopped, which it reads
    back every ``check_every`` epochs (each selector freezes at its own
    stop, so the results are those of stopping at once). ``finite()`` (a
    device bool) false after an epoch in which a selector still ran raises
    :class:`Diverged`, read back at the same points; the epochs run after
    every stopping selector has stopped change no result, so a NaN then
    does not count. ``pbar`` (:mod:`tqdm`) shows the values every 50
    epochs. Returns the epochs run.
    """
    running = torch.ones((), dtype=torch.bool, device=device)
    ok = torch.ones((), dtype=torch.bool, device=device)
    stopping = [s for s in selectors if s.stops]
    shown: Dict[str, Tensor] = {}
    epoch = 0

    def observe(values: Dict[str, Tensor]):
        for s in selectors:
            s.update(epoch, values, running)
        shown.update(values)

    for epoch in range(1, max_epochs + 1):
        step(epoch, observe)
        if finite is not None:  # ``running`` as this epoch's selectors saw it
            ok = ok & (finite() | ~running)
        if stopping:
            running = ~torch.stack([s.stopped for s in stopping]).all()
        if epoch % check_every == 0 or epoch == max_epochs:
            if finite is not None and not bool(ok):
                raise Diverged(epoch, 'the loss is NaN or infinite')
            if pbar is not None and shown and (epoch % 50 == 0 or epoch == 1):
                pbar.set_postfix(
                    run=label,
                    epoch=epoch,
                    **{k: f'{v:.3g}' for k, v in as_python(shown).items()},
                    refresh=True,
                )
            if stopping and not bool(running):
                break
    return epoch


def train(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    x: Tensor,
    edge_index: Tensor,
    y: Tensor,
    train_index: Tensor,
    measure: Callable[..., Dict[str, Tensor]],
    selectors: Sequence[Selector],
    max_epochs: int,
    separate_eval: bool = False,
    recorder=None,
    compile_after: Optional[int] = None,
    pbar=None,
    label: str = '',
) -> int:
    r"""Full-batch training of ``model`` (``forward_with_self_attention``)
    with the cross-entropy of the nodes ``train_index``, for at most
    ``max_epochs`` epochs or until every selector with a stopping rule has
    stopped. Each epoch, ``measure(out, loss, alphas)`` gives the
    epoch's values (device scalars) that the ``selectors`` see, always of
    the parameters before the epoch's update: from the training forward
    pass, or with ``separate_eval`` (a model with dropout) from an
    evaluation pass of the same parameters, so that dropout does not change
    which epoch is chosen. ``recorder`` (a
    :class:`~torch_geometric_gate.utils.SelfAttentionRecorder`) records
    alpha_vv of every training forward.

    Raises :class:`Diverged` once the loss (of an epoch in which a
    selector still ran) or a recorded alpha_vv is NaN or infinite. With
    ``compile_after=n``, a run still going after ``n`` epochs switches to
    :func:`torch.compile` of the forward pass, compiled afresh whatever ran
    before it in the process. The epochs run in
    :func:`run_epochs` (on a GPU reading the stopping rules back every 25
    epochs); returns the epochs run.
    """
    forward = model.forward_with_self_attention
    device = x.device
    check_every = 1 if device.type == 'cpu' or recorder is not None else 25
    y_train = y.index_select(0, train_index)
    finite = torch.ones((), dtype=torch.bool, device=device)

    def step(epoch, observe):
        nonlocal forward, finite
        if compile_after is not None and epoch == compile_after + 1:
            # Forget the graphs of earlier runs in this process: without
            # this, PyG's GATv2Conv.forward hits dynamo's recompile limit
            # after a few runs and then runs eagerly for the rest of them.
            torch._dynamo.reset()
            forward = torch.compile(forward, dynamic=False)
        model.train()
        optimizer.zero_grad()
        out, alphas = forward(x, edge_index)
        loss = F.cross_entropy(out.index_select(0, train_index), y_train)
        finite = finite & loss.detach().isfinite()
        if recorder is not None and alphas:
            try:
                recorder.record(alphas, epoch)
            except ValueError as e:
                if all(bool(a.isfinite().all()) for a in alphas):
                    raise
                raise Diverged(epoch, str(e)) from None
        if separate_eval:
            model.eval()
            with torch.no_grad():
                out, alphas = forward(x, edge_index)
            model.train()
        observe(measure(out, loss, alphas))
        loss.backward()
        optimizer.step()

    return run_epochs(
        step,
        selectors,
        max_epochs,
        device,
        check_every,
        pbar,
        label,
        finite=lambda: finite,
    )


def mask_index(mask: Tensor) -> Tensor:
    r"""The indices of a boolean mask (one synchronisation per run)."""
    return mask.nonzero().view(-1)
