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
