r"""Cross-references that resolve offline.

Two jobs, both on Sphinx's ``missing-reference`` event, that is, only for
references the Python domain (and intersphinx, when enabled) could not
resolve:

1. References to this package under another public path, such as
   ``torch_geometric_gate.nn.conv.GATEConv`` while the page documents
   ``torch_geometric_gate.nn.GATEConv``: the object is imported and linked to
   the page that documents it. A reference to a ``torch_geometric_gate``
   object that no page documents is a broken link; it is reported as a
   warning, so ``-W`` fails the build.
2. References to PyTorch, PyG and the standard library: without network
   there is no intersphinx inventory, so the URL of the object's page is
   built from the documentation layout of each project (PyTorch generates
   one page per class or function of some namespaces, PyG of others and
   documents the rest, such as ``torch_geometric.utils`` and
   ``torch_geometric.loader``, on one page per module). The object is
   imported first; a name that does not import, or whose page the layout
   does not give, stays plain text.
"""

import builtins
import importlib
import inspect

from docutils import nodes
from sphinx.util import logging
from sphinx.util.nodes import make_refnode

logger = logging.getLogger(__name__)

PACKAGE = 'torch_geometric_gate'
PYG_URL = 'https://pytorch-geometric.readthedocs.io/en/latest/'
TORCH_URL = 'https://docs.pytorch.org/docs/stable/'
PYTHON_URL = 'https://docs.python.org/3/'

_TORCH_PAGES = {
    'torch.Tensor': 'tensors.html',
    'torch.Size': 'size.html',
    'torch.dtype': 'tensor_attributes.html',
    'torch.device': 'tensor_attributes.html',
    'torch.Generator': 'generated/torch.Generator.html',
}
# PyG's layout, from its docs/source/modules/*.rst: the namespaces whose
# public names (`__all__`) it documents one per page, under
# `generated/<dotted name>.html` (an autosummary with a `:toctree:`), and
# the tensor classes of `torch_geometric` itself:
_PYG_GENERATED = {
    'torch_geometric.data',
    'torch_geometric.datasets',
    'torch_geometric.transforms',
    'torch_geometric.explain.algorithm',
    'torch_geometric.explain.metric',
    'torch_geometric.nn.conv',
    'torch_geometric.nn.aggr',
    'torch_geometric.nn.attention',
    'torch_geometric.nn.norm',
    'torch_geometric.nn.pool',
    'torch_geometric.nn.unpool',
    'torch_geometric.nn.models',
    'torch_geometric.nn.kge',
    'torch_geometric.nn.encoding',
    'torch_geometric.nn.functional',
    'torch_geometric.nn.dense',
}
_PYG_GENERATED_ROOT = {'Index', 'EdgeIndex', 'HashTensor'}
# The namespaces it documents on their module's page (`automodule`):
_PYG_MODULE_PAGES = {
    'torch_geometric.utils': 'modules/utils.html',
    'torch_geometric.loader': 'modules/loader.html',
}
# Objects it documents on a module's page (`autoclass`, `autofunction`),
# under the name given there:
_PYG_OBJECT_PAGES = {
    'torch_geometric.explain.Explainer': (
        'modules/explain.html',
        'torch_geometric.explain.Explainer',
    ),
    'torch_geometric.nn.dense.Linear': (
        'modules/nn.html',
        'torch_geometric.nn.dense.Linear',
    ),
    'torch_geometric.nn.to_hetero': (
        'modules/nn.html',
        'torch_geometric.nn.to_hetero_transformer.to_hetero',
    ),
}

# Namespaces whose classes and functions PyTorch documents one per page,
# under `generated/<dotted name>.html`.
_TORCH_GENERATED = {
    'torch',
    'torch.nn',
    'torch.nn.functional',
    'torch.jit',
    'torch.optim',
}


def _import(path):
    r"""Returns ``(obj, parent)`` for a dotted path, or ``(None, None)``."""
    parts = path.split('.')
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module('.'.join(parts[:i]))
        except Exception:
            continue
        parent = None
        try:
            for attr in parts[i:]:
                parent, obj = obj, getattr(obj, attr)
        except AttributeError:
            return None, None
        return obj, parent
    return None, None


def _public_path(path, obj):
    r"""The public dotted path of a class or function: :obj:`path` itself if
    it does not point into the defining (private) module, otherwise the
    longest enclosing package that exports :obj:`obj` under its name."""
    module = getattr(obj, '__module__', None)
    name = getattr(obj, '__name__', None)
    if module is None or name is None or path != f'{module}.{name}':
        return path
    parts = module.split('.')
    for i in range(len(parts) - 1, 0, -1):
        package = '.'.join(parts[:i])
        try:
            if getattr(importlib.import_module(package), name, None) is obj:
                return f'{package}.{name}'
        except Exception:
            continue
    return path


def _split_member(path, obj, parent):
    r"""``(page_path, anchor_path)`` for :obj:`obj` reached by :obj:`path`."""
    if inspect.isclass(parent):
        owner = path.rsplit('.', 1)[0]
        owner = _public_path(owner, parent)
        return owner, f'{owner}.{path.rsplit(".", 1)[1]}'
    public = _public_path(path, obj)
    return public, public


def external_url(path):
    r"""The documentation URL of a PyTorch, PyG or builtin object, or
    :obj:`None`."""
    if path in ('None', 'True', 'False'):
        return f'{PYTHON_URL}library/constants.html#{path}'
    if '.' not in path and hasattr(builtins, path):
        obj = getattr(builtins, path)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            return f'{PYTHON_URL}library/exceptions.html#{path}'
        if inspect.isclass(obj) or inspect.isbuiltin(obj):
            return f'{PYTHON_URL}library/functions.html#{path}'
        return None
    root = path.split('.')[0]
    if root not in ('torch', 'torch_geometric', 'typing'):
        return None
    obj, parent = _import(path)
    if obj is None:
        return None
    if root == 'typing':
        return f'{PYTHON_URL}library/typing.html#{path}'
    if inspect.ismodule(obj):
        if root == 'torch_geometric' and path.count('.') == 1:
            return f'{PYG_URL}modules/{path.split(".")[1]}.html'
        return None
    page, anchor = _split_member(path, obj, parent)
    if root == 'torch_geometric':
        return _pyg_url(page, anchor)
    if type(obj).__module__ == 'torch' and type(obj).__name__ == 'dtype':
        # A dtype (`torch.float`): the table of dtypes.
        return f'{TORCH_URL}{_TORCH_PAGES["torch.dtype"]}#torch.dtype'
    if page in _TORCH_PAGES:
        return f'{TORCH_URL}{_TORCH_PAGES[page]}#{anchor}'
    if page.startswith('torch.nn.init.'):
        return f'{TORCH_URL}nn.init.html#{anchor}'
    if page.rsplit('.', 1)[0] in _TORCH_GENERATED:
        return f'{TORCH_URL}generated/{page}.html#{anchor}'
    return None  # Other namespaces are laid out differently; plain text.


def _pyg_url(page, anchor):
    r"""The URL of a PyG object documented on :obj:`page` (its dotted
    path) at :obj:`anchor`, or :obj:`None` where PyG documents no page for
    it (type aliases, base classes such as ``BasicGNN``)."""
    if page in _PYG_OBJECT_PAGES:
        html, name = _PYG_OBJECT_PAGES[page]
        return f'{PYG_URL}{html}#{name}{anchor[len(page) :]}'
    namespace, name = page.rsplit('.', 1)
    if namespace in _PYG_MODULE_PAGES:
        return f'{PYG_URL}{_PYG_MODULE_PAGES[namespace]}#{anchor}'
    if namespace == 'torch_geometric':
        generated = name in _PYG_GENERATED_ROOT
    else:
        module, _ = _import(namespace)
        generated = namespace in _PYG_GENERATED and name in getattr(
            module, '__all__', ()
        )
    if generated:
        return f'{PYG_URL}generated/{page}.html#{anchor}'
    return None


def _documented(app, env):
    r"""Maps ``id(obj)`` to the documented name of every object of this
    package that a page describes."""
    cache = getattr(app, '_gate_documented', None)
    if cache is None:
        cache = {}
        for name, entry in env.get_domain('py').objects.items():
            if not name.startswith(PACKAGE + '.') or entry.aliased:
                continue
            obj, _ = _import(name)
            if obj is not None:
                cache.setdefault(id(obj), name)
        app._gate_documented = cache
    return cache


def _candidates(node):
    target = node['reftarget'].lstrip('.~')
    out = [target]
    module, cls = node.get('py:module'), node.get('py:class')
    if cls and module:
        out.append(f'{module}.{cls}.{target}')
    if module:
        out.append(f'{module}.{target}')
    return out


def resolve(app, env, node, contnode):
    if node.get('refdomain') != 'py':
        return None
    for target in _candidates(node):
        if target == PACKAGE or target.startswith(PACKAGE + '.'):
            obj, _ = _import(target)
            if obj is None:
                continue
            name = _documented(app, env).get(id(obj))
            if name is None:
                continue
            entry = env.get_domain('py').objects[name]
            return make_refnode(
                app.builder,
                node['refdoc'],
                entry.docname,
                entry.node_id,
                contnode,
                name,
            )
    target = node['reftarget'].lstrip('.~')
    if target == PACKAGE or target.startswith(PACKAGE + '.'):
        logger.warning(
            f'reference to undocumented object {target!r}',
            location=node,
            type='ref',
            subtype='gate',
        )
        return None
    url = external_url(target)
    if url is None:
        return None
    ref = nodes.reference('', '', internal=False, refuri=url, reftitle=target)
    ref.append(contnode)
    return ref


def _reset(app, env, *args):
    app._gate_documented = None


def setup(app):
    # After intersphinx (priority 500), so that its inventories win when the
    # build is online and they are enabled.
    app.connect('missing-reference', resolve, priority=900)
    app.connect('env-updated', _reset)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
