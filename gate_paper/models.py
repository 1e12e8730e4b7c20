r"""The one model registry of the paper's scripts: :func:`build_model`
makes a model of a recipe by name.

Recipes:

- ``'synthetic'`` (Sec. 5.1, Tables 1 and 2): ``GAT_S``, ``GAT`` (PyG's
  ``GATv2Conv``, :class:`GATv2Net`), ``GATE_S``, ``GATE``
  (:class:`torch_geometric_gate.nn.models.GATE`), looks-linear init;
- ``'paper'`` (Sec. 5.2, real graphs): ``MLP``, ``GAT``, ``MLP+GAT``,
  ``FAGCN``, ``GATE``, ``GATE_S``, without bias, looks-linear init; except
  FAGCN, whose input and output layers are PyTorch's default ``Linear``
  (with bias, default init; the authors' runs had no bias anywhere);
- ``'strong'`` (Platonov et al.'s residual recipe, :class:`StrongNet`):
  those and ``GAT-sep``, ``GATE-sep``, ``GATv2``.

Every model has ``forward_with_self_attention(x, edge_index)`` returning
``(logits, alphas)``, the alpha_vv of each attention layer.
"""

import torch
import torch.nn.functional as F
from torch_geometric.nn import FAConv, GATConv, GATv2Conv
from torch_geometric.nn.models import MLP

from gate_paper.model_names import (  # noqa: F401 (names of the recipes)
    ATTENTION_MODELS,
    MODELS,
    PAPER_MODELS,
    RECIPES,
    SEP_MODELS,
    STRONG_MODELS,
    STRONG_ONLY,
    SYNTHETIC_MODELS,
    needs_even_hidden,
)
from torch_geometric_gate.nn import GATEConv
from torch_geometric_gate.nn.inits import looks_linear_orthogonal_
from torch_geometric_gate.nn.models import GATE
from torch_geometric_gate.utils import self_loop_attention


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


# The paper's recipe on real graphs (Sec. 5.2) ------------------------------


class PaperMLP(torch.nn.Module):
    r"""PyG's ``MLP`` without bias or normalisation, ReLU, looks-linear
    orthogonal init."""

    def __init__(self, in_channels, hidden, out_channels, num_layers):
        super().__init__()
        self.mlp = MLP(
            in_channels=in_channels,
            hidden_channels=hidden,
            out_channels=out_channels,
            num_layers=num_layers,
            norm=None,
            bias=False,
            dropout=0.0,
        )
        for i, lin in enumerate(self.mlp.lins):
            looks_linear_orthogonal_(lin.weight, _position(i, num_layers))

    def forward_with_self_attention(self, x, edge_index):
        return self.mlp(x), []


class PaperMLPGAT(torch.nn.Module):
    r"""MLP+GAT of Sec. 5.2: ``GATv2Conv`` (slope 0.2) and linear layers
    alternating, a GAT layer first, ReLU between layers, no bias,
    looks-linear init (Xavier-normal attention vectors)."""

    def __init__(self, in_channels, hidden, out_channels, num_layers):
        super().__init__()
        sizes = [in_channels] + [hidden] * (num_layers - 1) + [out_channels]
        self.layers = torch.nn.ModuleList()
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            position = _position(i, num_layers)
            if i % 2 == 0:
                conv = GATv2Conv(a, b, negative_slope=0.2, bias=False)
                looks_linear_orthogonal_(conv.lin_l.weight, position)
                looks_linear_orthogonal_(conv.lin_r.weight, position)
                torch.nn.init.xavier_normal_(conv.att)
                self.layers.append(conv)
            else:
                lin = torch.nn.Linear(a, b, bias=False)
                looks_linear_orthogonal_(lin.weight, position)
                self.layers.append(lin)

    def forward_with_self_attention(self, x, edge_index):
        alphas = []
        for i, layer in enumerate(self.layers):
            if isinstance(layer, GATv2Conv):
                num_nodes = x.size(0)
                x, (ei, alpha) = layer(
                    x, edge_index, return_attention_weights=True
                )
                alphas.append(self_loop_attention(ei, alpha, num_nodes))
            else:
                x = layer(x)
            if i < len(self.layers) - 1:
                x = x.relu()
        return x, alphas


class PaperFAGCN(torch.nn.Module):
    r"""FAGCN: a linear input layer, ``num_layers`` ``FAConv`` layers (no
    self-loops, ``eps`` times the input embedding added in every layer),
    ReLU after every hidden layer (Appendix B), a linear output layer. The
    linear layers are PyTorch's default ``Linear``, with a bias and the
    default init (the committed runs were made so), unlike the rest of the
    paper recipe and the authors' runs, which had no bias."""

    def __init__(self, in_channels, hidden, out_channels, num_layers, eps):
        super().__init__()
        self.lin_in = torch.nn.Linear(in_channels, hidden)
        self.convs = torch.nn.ModuleList(
            FAConv(hidden, eps=eps, add_self_loops=False)
            for _ in range(num_layers)
        )
        self.lin_out = torch.nn.Linear(hidden, out_channels)

    def forward_with_self_attention(self, x, edge_index):
        x = x0 = self.lin_in(x).relu()
        for conv in self.convs:
            x = conv(x, x0, edge_index).relu()
        return self.lin_out(x), []


class PaperGATE(torch.nn.Module):
    def __init__(self, in_channels, hidden, out_channels, num_layers, share):
        super().__init__()
        self.gate = GATE(
            in_channels,
            hidden,
            num_layers,
            out_channels,
            share_weights=share,
            init='looks_linear',
            bias=False,
        )

    def forward_with_self_attention(self, x, edge_index):
        return self.gate.forward_with_self_attention(x, edge_index)


# The strong recipe (Platonov et al.) -------------------------------------


class FeedForward(torch.nn.Sequential):
    def __init__(self, in_channels, hidden, dropout):
        super().__init__(
            torch.nn.Linear(in_channels, hidden),
            torch.nn.Dropout(dropout),
            torch.nn.GELU(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.Dropout(dropout),
        )


class StrongBlock(torch.nn.Module):
    r"""``x + FF(conv(LayerNorm(x)))``; ``kind`` is ``'ff'`` (no graph
    layer), ``'gat1'`` (PyG's ``GATConv``: Platonov et al.'s GAT and
    GAT-sep), ``'gat'`` (``GATv2Conv``), ``'gate'``, ``'gate_s'`` or
    ``'fagcn'``; with ``sep`` the feed-forward part sees ``[h, conv(h)]``,
    ``h = LayerNorm(x)``, the graph layer aggregating the neighbours only
    (GAT-sep: ``GATConv`` without self-loops; GATE keeps its self-loop, the
    switch, and sees ``h`` separately as well)."""

    def __init__(self, kind, hidden, heads, dropout, sep=False, eps=0.1):
        super().__init__()
        self.kind, self.sep = kind, sep
        self.norm = torch.nn.LayerNorm(hidden)
        if kind == 'gat1':
            self.conv = GATConv(
                hidden,
                hidden // heads,
                heads=heads,
                add_self_loops=not sep,
            )
        elif kind == 'gat':
            self.conv = GATv2Conv(
                hidden,
                hidden // heads,
                heads=heads,
                negative_slope=0.2,
                add_self_loops=not sep,
            )
        elif kind in ('gate', 'gate_s'):
            self.conv = GATEConv(
                hidden,
                hidden // heads,
                heads=heads,
                share_weights=kind == 'gate_s',
            )
        elif kind == 'fagcn':
            self.conv = FAConv(hidden, eps=eps, add_self_loops=False)
        self.ff = FeedForward(hidden * (2 if sep else 1), hidden, dropout)

    def forward(self, x, x0, edge_index):
        h = self.norm(x)
        alpha = None
        if self.kind in ('gate', 'gate_s'):  # The self-loops' weights alone:
            agg, alpha = self.conv.forward_with_self_attention(h, edge_index)
        elif self.kind in ('gat', 'gat1'):
            agg, (ei, att) = self.conv(
                h, edge_index, return_attention_weights=True
            )
            if not self.sep:
                alpha = self_loop_attention(ei, att, h.size(0))
        elif self.kind == 'fagcn':
            agg = self.conv(h, x0, edge_index)
        else:
            agg = h
        if self.sep:
            agg = torch.cat([h, agg], dim=-1)
        return x + self.ff(agg), alpha


class StrongNet(torch.nn.Module):
    def __init__(
        self,
        kinds,
        in_channels,
        hidden,
        out_channels,
        heads,
        dropout,
        sep,
        eps,
    ):
        super().__init__()
        self.lin_in = torch.nn.Linear(in_channels, hidden)
        self.dropout = torch.nn.Dropout(dropout)
        self.blocks = torch.nn.ModuleList(
            StrongBlock(kind, hidden, heads, dropout, sep, eps)
            for kind in kinds
        )
        self.norm_out = torch.nn.LayerNorm(hidden)
        self.lin_out = torch.nn.Linear(hidden, out_channels)

    def forward_with_self_attention(self, x, edge_index):
        x = x0 = F.gelu(self.dropout(self.lin_in(x)))
        alphas = []
        for block in self.blocks:
            x, alpha = block(x, x0, edge_index)
            if alpha is not None:
                alphas.append(alpha)
        return self.lin_out(self.norm_out(x)), alphas


def build_model(
    recipe: str,
    name: str,
    in_channels: int,
    hidden: int,
    out_channels: int,
    num_layers: int,
    heads: int = 1,
    dropout: float = 0.0,
    eps: float = 0.1,
) -> torch.nn.Module:
    r"""The model ``name`` of ``recipe`` (see the module's docstring):
    ``num_layers`` graph layers of width ``hidden``; ``heads``, ``dropout``
    for the strong recipe (another recipe with ``heads != 1`` or
    ``dropout != 0`` is a :class:`ValueError`), ``eps`` for FAGCN. Seed
    torch before calling it for a reproducible initialisation. A model
    with the looks-linear init and hidden units needs an even ``hidden``
    (a :class:`ValueError` otherwise,
    :func:`~gate_paper.model_names.needs_even_hidden`)."""
    if recipe not in MODELS or name not in MODELS[recipe]:
        known = MODELS.get(recipe)
        raise ValueError(
            f'unknown model {name!r} of recipe {recipe!r}; expected a recipe '
            f'of {RECIPES}'
            + ('' if known is None else f' and a model of {known}')
        )
    if recipe != 'strong' and (heads != 1 or dropout != 0.0):
        # The synthetic and paper recipes have one head and no dropout
        # (Appendix B); their models would build without either.
        raise ValueError(
            f'heads and dropout apply to the strong recipe only; the '
            f'{recipe} recipe has one head and no dropout, got '
            f'heads={heads}, dropout={dropout}'
        )
    if hidden % 2 and needs_even_hidden(recipe, name, num_layers):
        raise ValueError(
            f'{name} of the {recipe} recipe with {num_layers} layers needs '
            f'an even hidden width for its looks-linear initialisation, got '
            f'{hidden}'
        )
    L = num_layers
    if recipe == 'synthetic':
        if name in ('GAT', 'GAT_S'):
            return GATv2Net(
                in_channels, hidden, out_channels, L, name == 'GAT_S'
            )
        return GATE(
            in_channels,
            hidden,
            L,
            out_channels,
            share_weights=name == 'GATE_S',
            init='looks_linear',
        )
    if recipe == 'paper':
        if name == 'MLP':
            return PaperMLP(in_channels, hidden, out_channels, L)
        if name == 'GAT':
            return GATv2Net(in_channels, hidden, out_channels, L)
        if name == 'MLP+GAT':
            return PaperMLPGAT(in_channels, hidden, out_channels, L)
        if name == 'FAGCN':
            return PaperFAGCN(in_channels, hidden, out_channels, L, eps)
        return PaperGATE(
            in_channels, hidden, out_channels, L, name == 'GATE_S'
        )
    if hidden % heads != 0:
        raise ValueError(
            f'hidden ({hidden}) must be divisible by heads ({heads})'
        )
    if name == 'MLP+GAT':
        kinds = ['gat' if i % 2 == 0 else 'ff' for i in range(L)]
    else:
        kind = {
            'MLP': 'ff',
            'GAT': 'gat1',  # Platonov et al.'s GAT: PyG's GATConv
            'GAT-sep': 'gat1',
            'GATv2': 'gat',
            'FAGCN': 'fagcn',
            'GATE': 'gate',
            'GATE-sep': 'gate',
            'GATE_S': 'gate_s',
        }[name]
        kinds = [kind] * L
    return StrongNet(
        kinds,
        in_channels,
        hidden,
        out_channels,
        heads,
        dropout,
        name in SEP_MODELS,
        eps,
    )
