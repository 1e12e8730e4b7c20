r"""``gate_sphinx.xref``: the offline links to PyTorch and PyG lead to pages
that document their object.

PyG's layout is read from its own documentation source, the
``docs/source/modules/*.rst`` of the PyG snapshot in
``../shared/upstream/`` (the tests that need it skip without it, as those of
``upstream/make_pr.py`` do): an object has a ``generated/<name>.html`` page
where an autosummary with a ``:toctree:`` lists it, and is documented on
``modules/<module>.html`` by an ``automodule``, ``autoclass`` or
``autofunction`` there.
"""

import importlib
import re
import tarfile
from pathlib import Path

import pytest

pytest.importorskip('sphinx')
from gate_sphinx.xref import PYG_URL, TORCH_URL, external_url  # noqa: E402

TARBALL = (
    Path(__file__).resolve().parents[2]
    / 'shared'
    / 'upstream'
    / 'pytorch_geometric-5c6461b.tar.gz'
)
# The PyG objects that the docs and the docstrings link to:
PYG_NAMES = [
    'torch_geometric.EdgeIndex',
    'torch_geometric.data.Data',
    'torch_geometric.data.HeteroData',
    'torch_geometric.data.InMemoryDataset',
    'torch_geometric.datasets.HeterophilousGraphDataset',
    'torch_geometric.datasets.Planetoid',
    'torch_geometric.explain.Explainer',
    'torch_geometric.explain.algorithm.AttentionExplainer',
    'torch_geometric.explain.algorithm.GNNExplainer',
    'torch_geometric.loader.ClusterLoader',
    'torch_geometric.loader.LinkNeighborLoader',
    'torch_geometric.loader.NeighborLoader',
    'torch_geometric.loader.ShaDowKHopSampler',
    'torch_geometric.nn.conv.GATConv',
    'torch_geometric.nn.conv.GATv2Conv',
    'torch_geometric.nn.conv.HeteroConv',
    'torch_geometric.nn.conv.MessagePassing',
    'torch_geometric.nn.dense.Linear',
    'torch_geometric.nn.models.GAT',
    'torch_geometric.nn.models.basic_gnn.BasicGNN',
    'torch_geometric.nn.to_hetero',
    'torch_geometric.transforms.AddSelfLoops',
    'torch_geometric.transforms.BaseTransform',
    'torch_geometric.transforms.OneHotDegree',
    'torch_geometric.transforms.RandomNodeSplit',
    'torch_geometric.utils.erdos_renyi_graph',
    'torch_geometric.utils.scatter',
    'torch_geometric.utils.softmax',
    'torch_geometric.utils.to_torch_csr_tensor',
]


LOOP = re.compile(r'\{% for \w+ in (\S+) %\}')


def _wanted(namespace):
    # Only the namespaces of PYG_NAMES are imported (others need extras,
    # or warn at import).
    return any(name.startswith(f'{namespace}.') for name in PYG_NAMES)


def _names(expression):
    r"""The names a Jinja loop of PyG's docs iterates over
    (``torch_geometric.nn.conv.classes``), from the installed PyG."""
    module, attr = expression.rsplit('.', 1)
    return list(getattr(importlib.import_module(module), attr))


def _documented(stem, text):
    r"""``{anchor: page}`` of the objects that :obj:`text`, PyG's
    ``docs/source/modules/<stem>.rst``, documents."""
    out, module_page = {}, f'modules/{stem}.html'
    current = loop = None
    for block in re.split(r'\n(?=\.\. )', text):  # one per directive
        # The Jinja loop in the block, or ending the block before it
        # (around an autoclass):
        previous, loop = loop, LOOP.search(block)
        match = re.match(r'\.\. (?:py:)?currentmodule:: (\S+)', block)
        if match:
            current = match.group(1)
            continue
        if block.startswith('.. autosummary::') and ':toctree:' in block:
            if not _wanted(current):
                continue
            names = (
                _names(loop.group(1)) if loop else [
                    line.strip() for line in block.splitlines()[1:]
                    if re.fullmatch(r'\s+\w+', line)
                ]
            )  # fmt: skip
            for name in names:
                out[f'{current}.{name}'] = f'generated/{current}.{name}.html'
            continue
        if block.startswith('.. autoclass:: {{') and previous:
            if _wanted(current):
                for name in _names(previous.group(1)):
                    out[f'{current}.{name}'] = module_page
            continue
        match = re.match(r'\.\. auto(class|function|module):: ([\w.]+)', block)
        if match is None:
            continue  # (an autosummary without a toctree is a table)
        kind, target = match.groups()
        if kind != 'module':
            out[target] = module_page
        elif ':members:' in block and _wanted(target):
            for name in importlib.import_module(target).__all__:
                out.setdefault(f'{target}.{name}', module_page)
    return out


@pytest.fixture(scope='module')
def pyg_pages():
    r"""``{anchor: page}`` of every object PyG's docs document."""
    if not TARBALL.is_file():
        pytest.skip(f'PyG snapshot not found: {TARBALL}')
    out = {}
    with tarfile.open(TARBALL) as tar:
        for member in tar.getmembers():
            path = Path(member.name)
            if path.parent.parts[-3:] == ('docs', 'source', 'modules'):
                text = tar.extractfile(member).read().decode()
                out.update(_documented(path.stem, text))
    return out


@pytest.mark.parametrize('name', PYG_NAMES)
def test_a_pyg_link_leads_to_the_page_that_documents_it(name, pyg_pages):
    url = external_url(name)
    if url is None:  # plain text: PyG documents it nowhere
        documented = {k for k in pyg_pages if k.endswith(name.split('.')[-1])}
        assert name not in pyg_pages, (name, documented)
        return
    assert url.startswith(PYG_URL)
    page, anchor = url[len(PYG_URL) :].split('#')
    assert pyg_pages.get(anchor) == page, (name, url, pyg_pages.get(anchor))


def test_a_pyg_method_is_linked_on_its_class_page():
    url = external_url('torch_geometric.loader.NeighborLoader.collate_fn')
    assert url == (
        f'{PYG_URL}modules/loader.html'
        '#torch_geometric.loader.NeighborLoader.collate_fn'
    )
    url = external_url('torch_geometric.nn.conv.MessagePassing.propagate')
    assert url == (
        f'{PYG_URL}generated/torch_geometric.nn.conv.MessagePassing.html'
        '#torch_geometric.nn.conv.MessagePassing.propagate'
    )


def test_a_dtype_links_to_the_table_of_dtypes():
    # PyTorch has no page per dtype (`generated/torch.float.html` is none).
    for name in ('torch.float', 'torch.uint8', 'torch.float32'):
        assert external_url(name) == (
            f'{TORCH_URL}tensor_attributes.html#torch.dtype'
        )
    assert external_url('torch.compile') == (
        f'{TORCH_URL}generated/torch.compile.html#torch.compile'
    )
