r"""The PyG pull request of :obj:`upstream/make_pr.py`, applied to a snapshot
of PyG's source (:obj:`../shared/upstream/`) and tested with PyG's tests.
"""

import importlib.util
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKE_PR = ROOT / 'upstream' / 'make_pr.py'
SOURCE = ROOT / 'torch_geometric_gate' / 'nn' / 'conv' / 'gate_conv.py'
TARBALL = (
    Path(__file__).resolve().parents[3]
    / 'shared'
    / 'upstream'
    / 'pytorch_geometric-5c6461b.tar.gz'
)
GENERATED = ('torch_geometric', 'nn', 'conv', 'gate_conv.py')
ATTENTIVE_FP = ('torch_geometric', 'nn', 'models', 'attentive_fp.py')


def _load_make_pr():
    spec = importlib.util.spec_from_file_location('make_pr', MAKE_PR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_pr = _load_make_pr()


def _snapshot(tree: Path) -> dict:
    return {
        path: path.read_bytes()
        for path in sorted(tree.rglob('*'))
        if path.is_file() and '__pycache__' not in path.parts
    }


@pytest.fixture(scope='module')
def pyg(tmp_path_factory):
    r"""The PyG snapshot with the pull request applied (twice), the original
    :obj:`attentive_fp.py` and the files of the first run.
    """
    if not TARBALL.is_file():
        pytest.skip(f'PyG snapshot not found: {TARBALL}')
    tmp = tmp_path_factory.mktemp('pyg')
    with tarfile.open(TARBALL) as tar:
        if hasattr(tarfile, 'data_filter'):
            tar.extractall(tmp, filter='data')
        else:  # Python < 3.10.12 / 3.11.4
            tar.extractall(tmp)
    tree = tmp / 'pytorch_geometric'
    original = tmp / 'attentive_fp_original.py'
    original.write_bytes(tree.joinpath(*ATTENTIVE_FP).read_bytes())

    assert make_pr.main([str(tree)]) == 0
    first = _snapshot(tree)
    assert make_pr.main([str(tree)]) == 0
    return tree, original, first


def _run(script: str, tree: Path, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE='1')
    return subprocess.run(
        [sys.executable, *script],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        **kwargs,
    )


def _check(result: subprocess.CompletedProcess):
    output = result.stdout + result.stderr
    print(output)
    assert result.returncode == 0, output


def test_make_pr_is_idempotent(pyg):
    tree, _, first = pyg
    assert _snapshot(tree) == first

    init = tree.joinpath('torch_geometric', 'nn', 'conv', '__init__.py')
    init = init.read_text()
    assert init.count('from .gate_conv import GATEConv\n') == 1
    assert init.count("    'GATEConv',\n") == 1
    assert init.index('GATv2Conv\n') < init.index('from .gate_conv')

    changelog = (tree / 'CHANGELOG.md').read_text()
    assert changelog.count('- Added `GATEConv`') == 1
    unreleased = changelog.split('\n## [')[1]
    assert unreleased.startswith('Unreleased]')
    added = unreleased.split('### Added\n\n')[1]
    assert added.startswith('- Added `GATEConv`, the GATE graph attention')
    url = 'https://github.com/pyg-team/pytorch_geometric/pull/XXXX'
    assert f'([#XXXX]({url}))' in added.splitlines()[0]
    assert (tree / 'README.md').read_text().count('**[GATEConv]') == 1

    attentive_fp = tree.joinpath(*ATTENTIVE_FP).read_text()
    assert 'class GATEConv(' not in attentive_fp
    assert attentive_fp.count('class _AttentiveFPGATEConv(') == 1
    assert all(len(line) <= 79 for line in attentive_fp.splitlines())

    # Another PR number updates the entry in place:
    assert make_pr.main([str(tree), '--pr', '12345']) == 0
    changelog = (tree / 'CHANGELOG.md').read_text()
    assert changelog.count('- Added `GATEConv`') == 1
    assert '[#12345](' in changelog and '#XXXX' not in changelog
    assert make_pr.main([str(tree)]) == 0
    assert _snapshot(tree) == first


def test_pyg_tests_pass(pyg):
    tree, _, _ = pyg
    result = _run(
        [
            '-m',
            'pytest',
            '-q',
            '-p',
            'no:cacheprovider',
            'test/nn/conv/test_gate_conv.py',
            'test/nn/conv/test_gatv2_conv.py',
            'test/nn/models/test_attentive_fp.py',
        ],
        tree,
        timeout=900,
    )
    _check(result)
    assert ' passed' in result.stdout and 'test_gate_conv.py' in result.stdout


def _marked_lines_removed(lines):
    # Our file with the marked lines removed and the `else:` body dedented,
    # found by the markers' positions (one of each):
    def index(predicate):
        hits = [i for i, line in enumerate(lines) if predicate(line)]
        assert len(hits) == 1, hits
        return hits[0]

    imp = index(lambda line: line.rstrip().endswith('# gate-kernels'))
    begin = index(lambda line: '# gate-kernels: begin' in line)
    end = index(lambda line: '# gate-kernels: end' in line)
    dedent_end = index(lambda line: '# gate-kernels: dedent end' in line)
    assert imp < begin < end < dedent_end
    assert lines[imp].startswith(('from ', 'import '))
    assert '(' not in lines[imp].split('#')[0]  # one line
    # The blank line after the import goes too, where it stood alone:
    blank = not lines[imp - 1].strip() and not lines[imp + 1].strip()
    body = [
        line[4:] if line.strip() else line
        for line in lines[end + 1 : dedent_end]
    ]
    assert all(line.startswith('    ') for line in lines[end + 1 : dedent_end])
    return (
        lines[:imp]
        + lines[imp + 1 + blank : begin]
        + body
        + lines[dedent_end + 1 :]
    )


def test_pyg_pre_commit_formatting(pyg):
    # PyG's pre-commit formats with yapf (pinned there: 0.43.0) in the
    # configuration of its pyproject.toml; the generated files pass it as
    # they are, and so do ours (and the attentive_fp.py rename):
    yapf = pytest.importorskip('yapf.yapflib.yapf_api')
    tree, _, _ = pyg
    style = str(tree / 'pyproject.toml')
    for path in (
        tree.joinpath(*GENERATED),
        tree / 'test' / 'nn' / 'conv' / 'test_gate_conv.py',
        tree.joinpath(*ATTENTIVE_FP),
        SOURCE,
    ):
        text = path.read_text()
        formatted, _ = yapf.FormatCode(text, style_config=style)
        assert formatted == text, f'{path} is not formatted as PyG formats'


def test_generated_file_is_ours_without_the_kernel_hand_off(pyg):
    tree, _, _ = pyg
    ours = SOURCE.read_text().splitlines()
    generated = tree.joinpath(*GENERATED).read_text().splitlines()
    expected = [
        line.replace(
            'from torch_geometric_gate import GATEConv',
            'from torch_geometric.nn import GATEConv',
        )
        for line in _marked_lines_removed(ours)
    ]
    assert generated == expected
    assert len(ours) - len(generated) >= 5
    text = '\n'.join(generated)
    assert 'torch_geometric_gate' not in text and 'gate-kernels' not in text
    # The reference path, at the method's indentation:
    for call in ('alpha = self.edge_updater(', 'out = self.propagate('):
        assert any(line.startswith(' ' * 8 + call) for line in generated)
    assert not re.search(r'\bselect_kernel\b|\battend\(', text)


def test_make_pr_rejects_other_mentions_of_our_package():
    text = SOURCE.read_text() + '\n# see torch_geometric_gate.ops\n'
    with pytest.raises(make_pr.PRError, match='torch_geometric_gate'):
        make_pr.to_pyg(text)
    broken = SOURCE.read_text().replace('# gate-kernels: dedent end', '')
    with pytest.raises(make_pr.PRError, match='not closed|cannot dedent'):
        make_pr.to_pyg(broken)


def test_strip_kernels_rules():
    text = (
        'import torch\n'
        '\n'
        'from torch_geometric_gate.ops import (  # gate-kernels\n'
        '    attend,\n'
        '    select_kernel,\n'
        ')\n'
        '\n'
        'def f(x):\n'
        "    '''\n"
        '    >>> from torch_geometric_gate import GATEConv\n'
        "    '''\n"
        '    # gate-kernels: begin\n'
        '    if select_kernel(x) != 1:\n'
        '        y = attend(x)\n'
        '    else:\n'
        '        # gate-kernels: end\n'
        '        y = x + 1\n'
        '\n'
        '        y = y * 2\n'
        '    # gate-kernels: dedent end\n'
        '    return y\n'
        'class GATEConv(torch.nn.Module):\n'
        '    pass\n'
    )
    assert make_pr.to_pyg(text) == (
        'import torch\n'
        '\n'
        'def f(x):\n'
        "    '''\n"
        '    >>> from torch_geometric.nn import GATEConv\n'
        "    '''\n"
        '    y = x + 1\n'
        '\n'
        '    y = y * 2\n'
        '    return y\n'
        'class GATEConv(torch.nn.Module):\n'
        '    pass\n'
    )
    with pytest.raises(make_pr.PRError, match='attend'):
        make_pr.to_pyg(text.replace('y = x + 1', 'y = attend(x) + 1'))


EQUIVALENCE = r"""
import itertools
from pathlib import Path

import torch

import torch_geometric
from torch_geometric.nn import GATEConv as PyGGATEConv

tree = Path.cwd().resolve()
assert Path(torch_geometric.__file__).resolve().is_relative_to(tree)
assert PyGGATEConv.__module__ == 'torch_geometric.nn.conv.gate_conv'
sys.path.append(ROOT)  # Our package, after the tree.
from torch_geometric_gate import GATEConv, attention_kernel

torch.manual_seed(0)
N, N_DST = 7, 5
edge_index = torch.tensor([[0, 0, 1, 2, 2, 3, 1, 3, 6, 4, 5, 0],
                           [1, 1, 0, 2, 3, 0, 2, 2, 4, 4, 3, 4]])
num_checked = 0
for add_self_loops, bipartite, edge_dim, share_weights in itertools.product(
        [True, False], [False, True], [None, 3], [False, True]):
    kwargs = dict(heads=2, add_self_loops=add_self_loops, edge_dim=edge_dim,
                  share_weights=share_weights, residual=True)
    ours = GATEConv(6, 4, **kwargs)
    pyg = PyGGATEConv(6, 4, **kwargs)
    with torch.no_grad():
        for p in ours.parameters():
            p.normal_()
    pyg.load_state_dict(ours.state_dict())
    assert ours.state_dict().keys() == pyg.state_dict().keys()

    x = torch.randn(N, 6, requires_grad=True)
    x_dst = torch.randn(N_DST, 6, requires_grad=True)
    inputs = (x, x_dst) if bipartite else x
    edge_attr = None
    if edge_dim is not None:
        edge_attr = torch.randn(edge_index.size(1), 3, requires_grad=True)

    results = []
    for conv in (ours, pyg):
        leaves = [x, x_dst, edge_attr] + list(conv.parameters())
        leaves = [t for t in leaves if t is not None]
        with attention_kernel('reference'):
            out, (ei, alpha) = conv(inputs, edge_index, edge_attr,
                                    return_attention_weights=True)
        grads = torch.autograd.grad((out**2).sum() + (alpha**2).sum(), leaves,
                                    allow_unused=True)
        results.append((out, ei, alpha, grads))
    (out, ei, alpha, grads), (out2, ei2, alpha2, grads2) = results
    assert out.size(0) == (N_DST if bipartite else N)
    assert torch.equal(out, out2) and torch.equal(ei, ei2)
    assert torch.equal(alpha, alpha2)
    assert len(grads) == len(grads2)
    for g, g2 in zip(grads, grads2):
        assert (g is None) == (g2 is None)
        assert g is None or torch.equal(g, g2)
    num_checked += 1
print(f'{num_checked} configurations equal')
"""


def test_generated_layer_is_our_reference_path(pyg):
    tree, _, _ = pyg
    script = f'import sys\nROOT = {str(ROOT)!r}\n' + EQUIVALENCE
    result = _run(['-c', script], tree, timeout=600)
    _check(result)
    assert '16 configurations equal' in result.stdout


ATTENTIVE_FP_CHECK = r"""
import importlib.util
import sys
import warnings

import torch

from torch_geometric.nn import AttentiveFP
from torch_geometric.nn.models import attentive_fp

spec = importlib.util.spec_from_file_location('attentive_fp_original', PATH)
original = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = original
spec.loader.exec_module(original)
assert original.AttentiveFP is not AttentiveFP

torch.manual_seed(0)
old = original.AttentiveFP(8, 16, 4, edge_dim=3, num_layers=2,
                           num_timesteps=2)
new = AttentiveFP(8, 16, 4, edge_dim=3, num_layers=2, num_timesteps=2)
assert list(old.state_dict()) == list(new.state_dict())
new.load_state_dict(old.state_dict())  # strict
assert type(new.gate_conv).__name__ == '_AttentiveFPGATEConv'
assert type(old.gate_conv).__name__ == 'GATEConv'

x = torch.randn(5, 8)
edge_index = torch.tensor([[0, 0, 0, 1, 2, 3, 4], [1, 2, 3, 0, 0, 0, 3]])
edge_attr = torch.randn(edge_index.size(1), 3)
batch = torch.tensor([0, 0, 0, 0, 1])
old.eval(), new.eval()
assert torch.equal(old(x, edge_index, edge_attr, batch),
                   new(x, edge_index, edge_attr, batch))

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    from torch_geometric.nn.models.attentive_fp import GATEConv
assert GATEConv is attentive_fp._AttentiveFPGATEConv
assert any(issubclass(w.category, DeprecationWarning) for w in caught)
try:
    attentive_fp.NoSuchName
except AttributeError:
    pass
else:
    raise AssertionError
print('state dicts and outputs equal')
"""


def test_attentive_fp_rename_keeps_checkpoints(pyg):
    tree, original, _ = pyg
    script = f'PATH = {str(original)!r}\n' + ATTENTIVE_FP_CHECK
    result = _run(['-c', script], tree, timeout=300)
    _check(result)
    assert 'state dicts and outputs equal' in result.stdout


def test_not_a_pyg_checkout_exits_2(tmp_path):
    result = subprocess.run(
        [sys.executable, str(MAKE_PR), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert 'is not a PyG checkout' in result.stderr
    assert 'torch_geometric/nn/conv/__init__.py is missing' in result.stderr
    assert list(tmp_path.iterdir()) == []
