r"""The model names of each recipe of :mod:`gate_paper.models`, without
its imports (torch, PyG): the scripts' argument parsers offer them."""

SYNTHETIC_MODELS = ('GAT_S', 'GAT', 'GATE_S', 'GATE')
PAPER_MODELS = ('MLP', 'GAT', 'MLP+GAT', 'FAGCN', 'GATE', 'GATE_S')
STRONG_MODELS = PAPER_MODELS + ('GAT-sep', 'GATE-sep', 'GATv2')
MODELS = {
    'synthetic': SYNTHETIC_MODELS,
    'paper': PAPER_MODELS,
    'strong': STRONG_MODELS,
}
RECIPES = tuple(MODELS)
# Models of the strong recipe only (PyG's GATConv as GAT and GAT-sep next
# to GATv2), and those whose graph layer sees the neighbours only.
STRONG_ONLY = ('GAT-sep', 'GATE-sep', 'GATv2')
SEP_MODELS = ('GAT-sep', 'GATE-sep')
ATTENTION_MODELS = ('GAT', 'GATv2', 'MLP+GAT', 'GATE', 'GATE_S', 'GATE-sep')


def needs_even_hidden(recipe: str, name: str, num_layers: int) -> bool:
    r"""Whether model ``name`` of ``recipe`` with ``num_layers`` layers
    needs an even width: the looks-linear init mirrors the hidden units in
    pairs (``torch_geometric_gate.nn.inits.looks_linear_orthogonal_``); the
    synthetic recipe and the paper recipe's models but FAGCN use it, and a
    network of one layer has no hidden units."""
    looks_linear = recipe == 'synthetic' or (
        recipe == 'paper' and name != 'FAGCN'
    )
    return looks_linear and num_layers >= 2


def odd_hidden_error(hidden: int, name: str, num_layers: int) -> str:
    r"""The usage error of an odd ``--hidden`` where :func:`needs_even_hidden`
    holds for model ``name`` with ``num_layers`` layers."""
    return (
        f'argument --hidden: {name} with {num_layers} layers needs an even '
        'width for its looks-linear initialisation (it mirrors the hidden '
        f'units in pairs), got {hidden}'
    )
