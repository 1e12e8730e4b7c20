import pytest
import torch

from gate_paper.models import MODELS, build_model


@pytest.mark.parametrize(
    'recipe, name',
    [(recipe, name) for recipe, names in MODELS.items() for name in names],
)
def test_every_model_builds_and_runs(recipe, name):
    heads = 2 if recipe == 'strong' else 1
    torch.manual_seed(0)
    model = build_model(recipe, name, 5, 8, 3, 3, heads=heads)
    x = torch.randn(12, 5)
    edge_index = torch.randint(0, 12, (2, 30))
    out, alphas = model.forward_with_self_attention(x, edge_index)
    assert out.shape == (12, 3)
    for alpha in alphas:  # alpha_vv: one weight per node in [0, 1]
        assert alpha.shape[0] == 12
        assert bool(((alpha >= 0) & (alpha <= 1)).all())
    torch.manual_seed(0)
    again = build_model(recipe, name, 5, 8, 3, 3, heads=heads)
    for a, b in zip(model.parameters(), again.parameters(), strict=True):
        assert torch.equal(a, b)


def test_attention_layers_report_alpha():
    model = build_model('synthetic', 'GAT', 5, 8, 3, 4)
    _, alphas = model.forward_with_self_attention(
        torch.randn(6, 5), torch.tensor([[0, 1, 2], [1, 2, 3]])
    )
    assert len(alphas) == 4
    assert (
        build_model('paper', 'MLP', 5, 8, 3, 2).forward_with_self_attention(
            torch.randn(6, 5), torch.tensor([[0], [1]])
        )[1]
        == []
    )


@pytest.mark.parametrize(
    'recipe, name, message',
    [
        ('paper', 'GATv2', "unknown model 'GATv2' of recipe 'paper'"),
        ('synthetic', 'MLP', "unknown model 'MLP' of recipe 'synthetic'"),
        ('strongest', 'GAT', "recipe 'strongest'"),
    ],
)
def test_unknown_models(recipe, name, message):
    with pytest.raises(ValueError, match=message):
        build_model(recipe, name, 5, 8, 3, 2)


@pytest.mark.parametrize('recipe', ['synthetic', 'paper'])
@pytest.mark.parametrize('kwargs', [dict(heads=4), dict(dropout=0.5)])
def test_heads_and_dropout_of_the_one_head_recipes_are_refused(recipe, kwargs):
    # They built one-head models without dropout, silently.
    name = MODELS[recipe][-1]
    with pytest.raises(ValueError, match='apply to the strong recipe only'):
        build_model(recipe, name, 5, 8, 3, 2, **kwargs)
    model = build_model(recipe, name, 5, 8, 3, 2, heads=1, dropout=0.0)
    assert not any(
        isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules()
    )


def test_strong_heads_must_divide_hidden():
    with pytest.raises(ValueError, match='divisible by heads'):
        build_model('strong', 'GATE', 5, 10, 3, 2, heads=3)


@pytest.mark.parametrize(
    'recipe, name',
    [('synthetic', name) for name in MODELS['synthetic']]
    + [('paper', name) for name in MODELS['paper'] if name != 'FAGCN'],
)
def test_looks_linear_models_need_an_even_width(recipe, name):
    # GAT, GAT_S, MLP and MLP+GAT crashed with a raw traceback, GATE fell
    # back to Glorot with a warning.
    with pytest.raises(ValueError, match='needs an even hidden width'):
        build_model(recipe, name, 5, 7, 3, 2)
    build_model(recipe, name, 5, 7, 3, 1)  # no hidden units


def test_odd_widths_without_looks_linear_init():
    build_model('paper', 'FAGCN', 5, 7, 3, 2)
    build_model('strong', 'GATE', 5, 7, 3, 2, heads=7)


def test_strong_sep_models_are_those_the_docstring_names():
    # StrongBlock's docstring called GAT-sep's layer a GATv2 without
    # self-loops; it is PyG's GATConv (Platonov et al.'s GAT) without them.
    from torch_geometric.nn import GATConv, GATv2Conv

    from torch_geometric_gate.nn import GATEConv

    for name, cls, loops in (
        ('GAT', GATConv, True),
        ('GAT-sep', GATConv, False),
        ('GATv2', GATv2Conv, True),
        ('GATE-sep', GATEConv, True),
    ):
        model = build_model('strong', name, 5, 8, 3, 2, heads=2)
        sep = name.endswith('-sep')
        for block in model.blocks:
            assert type(block.conv) is cls and block.sep == sep
            assert block.conv.add_self_loops == loops
            assert block.ff[0].in_features == 8 * (2 if sep else 1)
