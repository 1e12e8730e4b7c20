r"""The PyG pull requests of :obj:`upstream/make_pr.py` (GATEConv in
:obj:`torch_geometric.nn.conv` or in :obj:`torch_geometric.contrib`, and the
AttentiveFP rename), applied to a snapshot of PyG's source
(:obj:`../shared/upstream/`) and tested with PyG's tests.
"""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKE_PR = ROOT / 'upstream' / 'make_pr.py'
SOURCE = ROOT / 'torch_geometric_gate' / 'nn' / 'conv' / 'gate_conv.py'
TEMPLATE = ROOT / 'upstream' / 'templates' / 'test_gate_conv.py'
TARBALL = (
    Path(__file__).resolve().parents[3]
    / 'shared'
    / 'upstream'
    / 'pytorch_geometric-5c6461b.tar.gz'
)
LAYER = Path('torch_geometric', 'nn', 'conv', 'gate_conv.py')
TEST = Path('test', 'nn', 'conv', 'test_gate_conv.py')
INIT = Path('torch_geometric', 'nn', 'conv', '__init__.py')
CONTRIB_LAYER = Path(
    'torch_geometric', 'contrib', 'nn', 'conv', 'gate_conv.py'
)
CONTRIB_TEST = Path('test', 'contrib', 'nn', 'conv', 'test_gate_conv.py')
CONTRIB_INIT = Path('torch_geometric', 'contrib', 'nn', 'conv', '__init__.py')
ATTENTIVE_FP = Path('torch_geometric', 'nn', 'models', 'attentive_fp.py')
CHANGELOG = Path('CHANGELOG.md')
README = Path('README.md')
PR_URL = 'https://github.com/pyg-team/pytorch_geometric/pull/'


def _load(name: str):
    # As `python upstream/make_pr.py` runs it: its folder first on the
    # module search path, where its own modules (pr_files,
    # attentivefp_rename) are.
    if str(MAKE_PR.parent) not in sys.path:
        sys.path.insert(0, str(MAKE_PR.parent))
    if name != 'make_pr':
        return importlib.import_module(name)
    spec = importlib.util.spec_from_file_location(name, MAKE_PR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_pr = _load('make_pr')
rename = _load('attentivefp_rename')


def _extract(tmp: Path) -> Path:
    if not TARBALL.is_file():
        pytest.skip(f'PyG snapshot not found: {TARBALL}')
    with tarfile.open(TARBALL) as tar:
        if hasattr(tarfile, 'data_filter'):
            tar.extractall(tmp, filter='data')
        else:  # Python < 3.10.12 / 3.11.4
            tar.extractall(tmp)
    return tmp / 'pytorch_geometric'


def _extract_keeping_attentive_fp(tmp: Path) -> Tuple[Path, Path]:
    r"""The snapshot's tree and a copy of its :obj:`attentive_fp.py` beside
    it, as it was before any pull request."""
    tree = _extract(tmp)
    original = tmp / 'attentive_fp_original.py'
    original.write_bytes(tree.joinpath(ATTENTIVE_FP).read_bytes())
    return tree, original


def _snapshot(tree: Path) -> dict:
    return {
        path.relative_to(tree): path.read_bytes()
        for path in sorted(tree.rglob('*'))
        if path.is_file() and '__pycache__' not in path.parts
    }


def _changed(tree: Path, pristine: dict) -> set:
    now = _snapshot(tree)
    return {
        path
        for path in now.keys() | pristine.keys()
        if now.get(path) != pristine.get(path)
    }


@pytest.fixture(scope='module')
def layer(tmp_path_factory) -> Path:
    r"""The layer file as PyG gets it."""
    path = tmp_path_factory.mktemp('layer') / 'gate_conv.py'
    path.write_text(SOURCE.read_text())
    return path


@pytest.fixture(scope='module')
def pristine(tmp_path_factory) -> dict:
    return _snapshot(_extract(tmp_path_factory.mktemp('pristine')))


@pytest.fixture
def fresh(tmp_path) -> Path:
    return _extract(tmp_path)


@pytest.fixture(scope='module')
def pyg(tmp_path_factory, layer):
    r"""The snapshot with the GATEConv pull request applied (twice) and the
    files of the first run.
    """
    tree = _extract(tmp_path_factory.mktemp('pyg'))
    assert make_pr.main([str(tree), '--source', str(layer)]) == 0
    first = _snapshot(tree)
    assert make_pr.main([str(tree), '--source', str(layer)]) == 0
    return tree, first


@pytest.fixture(scope='module')
def contrib(tmp_path_factory, layer):
    tree = _extract(tmp_path_factory.mktemp('contrib'))
    args = [str(tree), '--contrib', '--source', str(layer)]
    assert make_pr.main(args) == 0
    first = _snapshot(tree)
    assert make_pr.main(args) == 0
    return tree, first


@pytest.fixture(scope='module')
def renamed(tmp_path_factory):
    r"""The snapshot with the AttentiveFP rename applied (twice), the
    original :obj:`attentive_fp.py` and the files of the first run.
    """
    tree, original = _extract_keeping_attentive_fp(
        tmp_path_factory.mktemp('renamed')
    )
    assert make_pr.main([str(tree), '--rename-attentivefp']) == 0
    first = _snapshot(tree)
    assert make_pr.main([str(tree), '--rename-attentivefp']) == 0
    return tree, original, first


def _run(script, tree: Path, **kwargs) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        PYTHONPATH=str(tree),
        PYTHONDONTWRITEBYTECODE='1',
        OMP_NUM_THREADS='1',
    )
    return subprocess.run(
        [sys.executable, *script],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        **kwargs,
    )


PYTEST = ['-q', '-p', 'no:cacheprovider']
# Runs the checks of one tree in one interpreter (importing torch and PyG
# costs seconds): each script as `python -c` would (its own globals, as
# `__main__`), then PyG's tests as `python -m pytest` would. The first part
# runs in a fresh interpreter; each part's output, traceback and exit code
# are its own section of stdout.
_PARTS = r"""
import json, sys, traceback

for name, kind, payload in json.loads(sys.argv[1]):
    print(f'\n=== begin {name} ===', flush=True)
    try:
        if kind == 'script':
            script = compile(payload, f'<{name}>', 'exec')
            exec(script, {'__name__': '__main__'})
            code = 0
        else:
            import pytest

            code = int(pytest.main(payload))
    except BaseException:
        traceback.print_exc(file=sys.stdout)
        code = 1
    sys.stdout.flush(), sys.stderr.flush()
    print(f'\n=== end {name}: exit {code} ===', flush=True)
"""


def _run_parts(tree: Path, *parts) -> dict:
    r"""Runs :obj:`parts` (:obj:`(name, 'script', code)` or :obj:`(name,
    'pytest', paths)`) in one interpreter in :obj:`tree`; returns each
    part's :obj:`(exit code, output)`."""
    parts = [
        (name, kind, code if kind == 'script' else PYTEST + list(code))
        for name, kind, code in parts
    ]
    result = _run(['-c', _PARTS, json.dumps(parts)], tree, timeout=900)
    print(result.stdout + result.stderr)
    assert result.returncode == 0, result.stdout + result.stderr
    sections = {}
    for name, _, _ in parts:
        match = re.search(
            rf'\n=== begin {re.escape(name)} ===\n(.*)'
            rf'\n=== end {re.escape(name)}: exit (-?\d+) ===\n',
            result.stdout,
            re.S,
        )
        assert match, f'no output of {name}: {result.stdout[-3000:]}'
        sections[name] = (int(match.group(2)), match.group(1))
    return sections


def _check_part(sections: dict, name: str) -> str:
    code, output = sections[name]
    assert code == 0, output
    return output


def _check_pytest(sections: dict, name: str) -> str:
    output = _check_part(sections, name)
    assert ' passed' in output and ' failed' not in output
    return output


def _unreleased(tree: Path, section: str) -> str:
    changelog = (tree / CHANGELOG).read_text()
    unreleased = changelog.split('\n## [')[1]
    assert unreleased.startswith('Unreleased]')
    return unreleased.split(f'### {section}\n\n')[1]


# The GATEConv pull request ###################################################


def test_make_pr_is_idempotent(pyg, pristine, layer):
    tree, first = pyg
    assert _snapshot(tree) == first
    assert _changed(tree, pristine) == {LAYER, TEST, INIT, CHANGELOG, README}

    init = tree.joinpath(INIT).read_text()
    assert init.count('from .gate_conv import GATEConv\n') == 1
    assert init.count("    'GATEConv',\n") == 1
    assert init.index('GATv2Conv\n') < init.index('from .gate_conv')

    added = _unreleased(tree, 'Added')
    assert added.startswith('- Added `GATEConv`, the graph attention layer')
    first_line = added.splitlines()[0]
    assert first_line.endswith(f'([#XXXX]({PR_URL}XXXX))')
    assert 'AttentiveFP' not in first_line  # The rename is its own PR.
    assert (tree / CHANGELOG).read_text().count('`GATEConv`') == 1
    assert (tree / README).read_text().count('**[GATEConv]') == 1

    # Another PR number updates the entry in place:
    assert (
        make_pr.main([str(tree), '--source', str(layer), '--pr', '12345']) == 0
    )
    changelog = (tree / CHANGELOG).read_text()
    assert changelog.count('- Added `GATEConv`') == 1
    assert f'[#12345]({PR_URL}12345)' in changelog and '#XXXX' not in changelog
    assert make_pr.main([str(tree), '--source', str(layer)]) == 0
    assert _snapshot(tree) == first


def test_generated_files_are_copies(pyg, layer):
    tree, _ = pyg
    assert tree.joinpath(LAYER).read_text() == layer.read_text()
    assert tree.joinpath(TEST).read_text() == TEMPLATE.read_text()


@pytest.fixture(scope='module')
def pyg_checks(pyg) -> dict:
    r"""The exports check, PyG's tests and the equivalence check in the
    tree of the GATEConv pull request (one interpreter)."""
    tree, _ = pyg
    equivalence = f'import sys\nROOT = {str(ROOT)!r}\n' + EQUIVALENCE
    coverage = f'ARGS = {PYTEST + [str(TEST)]!r}\n' + COVERAGE
    tests = [
        str(TEST),
        'test/nn/conv/test_gatv2_conv.py',
        'test/nn/models/test_attentive_fp.py',
    ]
    # The layer's test also as PyG's full CI runs it (TorchScript, compile):
    full = "import os\nos.environ['FULL_TEST'] = '1'"
    return _run_parts(
        tree,
        ('exports', 'script', EXPORTS),
        ('pytest', 'pytest', tests),
        ('equivalence', 'script', equivalence),
        ('coverage', 'script', coverage),
        ('full', 'script', full),
        ('pytest-full', 'pytest', [str(TEST)]),
    )


@pytest.mark.slow
def test_pyg_tests_pass(pyg_checks):
    out = _check_pytest(pyg_checks, 'pytest')
    assert 'test_gate_conv.py' in out
    # FULL_TEST=1 runs what PyG's regular CI skips (onlyFullTest):
    _check_pytest(pyg_checks, 'pytest-full')


EXPORTS = r"""
import torch_geometric.nn as nn
from torch_geometric.nn.conv.gate_conv import GATEConv
from torch_geometric.nn.models import attentive_fp

assert nn.GATEConv is nn.conv.GATEConv is GATEConv
assert 'GATEConv' not in nn.models.__all__
assert attentive_fp.GATEConv is not GATEConv  # AttentiveFP's own
assert attentive_fp.AttentiveFP is nn.AttentiveFP
print('exports ok')
"""


@pytest.mark.slow
def test_no_export_clash_with_attentive_fp(pyg_checks):
    # Without the rename, `torch_geometric.nn.GATEConv` and AttentiveFP's
    # internal class live in different modules (checked first, in a fresh
    # interpreter):
    assert 'exports ok' in _check_part(pyg_checks, 'exports')


def test_pyg_pre_commit_formatting(pyg, contrib, renamed, layer):
    # PyG's pre-commit formats with yapf (pinned there: 0.43.0) in the
    # configuration of its pyproject.toml; the generated files pass it as
    # they are:
    yapf = pytest.importorskip('yapf.yapflib.yapf_api')
    style = str(pyg[0] / 'pyproject.toml')
    for path in (
        pyg[0] / LAYER,
        pyg[0] / TEST,
        contrib[0] / CONTRIB_TEST,
        contrib[0] / CONTRIB_INIT,
        renamed[0] / ATTENTIVE_FP,
        layer,
    ):
        text = path.read_text()
        formatted, _ = yapf.FormatCode(text, style_config=style)
        assert formatted == text, f'{path} is not formatted as PyG formats'


def test_pyg_pre_commit_import_order(pyg, contrib, renamed):
    # ... and sorts the imports with isort (pinned there: 8.0.1) in its
    # configuration, `torch_geometric` its first party:
    isort = pytest.importorskip('isort')
    for tree, paths in (
        (pyg[0], (LAYER, TEST)),
        (contrib[0], (CONTRIB_TEST,)),
        (renamed[0], (ATTENTIVE_FP,)),
    ):
        config = isort.Config(settings_path=str(tree))
        for path in paths:
            assert isort.check_file(
                str(tree / path), config=config, show_diff=True
            ), f'{path}: imports not in the order of PyG isort'


def _pyg_ruff(tree: Path, *paths: Path) -> subprocess.CompletedProcess:
    # PyG's pre-commit also runs `ruff check` (pinned there: 0.15.15) with
    # its pyproject.toml (pydocstyle, bugbear); PyG's own files pass it:
    venv = Path(sys.executable).parent
    ruff = shutil.which('ruff', path=str(venv)) or shutil.which('ruff')
    if ruff is None:
        pytest.skip('ruff not found')
    return subprocess.run(
        [ruff, 'check', '--no-cache', '--config', 'pyproject.toml', *paths],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_pyg_ruff_accepts_generated_files(pyg, contrib, renamed):
    for tree, paths in [
        (pyg[0], [TEST, INIT]),
        (contrib[0], [CONTRIB_TEST, CONTRIB_INIT]),
        (renamed[0], [ATTENTIVE_FP]),
    ]:
        assert all(tree.joinpath(path).is_file() for path in paths)
        result = _pyg_ruff(tree, *paths)
        assert result.returncode == 0, result.stdout + result.stderr


def test_pyg_ruff_accepts_the_layer(pyg):
    tree, _ = pyg
    result = _pyg_ruff(tree, LAYER, Path('torch_geometric', 'nn', 'conv'))
    assert result.returncode == 0, result.stdout + result.stderr


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


@pytest.mark.slow
def test_generated_layer_is_our_reference_path(pyg_checks):
    out = _check_part(pyg_checks, 'equivalence')
    assert '16 configurations equal' in out


COVERAGE = r"""
import os
import subprocess
import sys
import tempfile

# The lines of the layer that PyG's test of the PR runs, measured by
# coverage.py as PyG's CI does (pytest-cov), in a fresh interpreter (this
# one imported the layer already). Left out: the bodies that only
# TorchScript (`if torch.jit.is_scripting():`) or type checkers read.
RC = r'''
[run]
include = */torch_geometric/nn/conv/gate_conv.py
[report]
exclude_lines =
    if torch\.jit\.is_scripting\(\):
    if typing\.TYPE_CHECKING:
show_missing = True
fail_under = 100
'''
with tempfile.TemporaryDirectory() as folder:
    rc, data = os.path.join(folder, 'rc'), os.path.join(folder, 'data')
    with open(rc, 'w') as f:
        f.write(RC)
    env = dict(os.environ, COVERAGE_FILE=data)
    coverage = [sys.executable, '-m', 'coverage']
    run = [*coverage, 'run', f'--rcfile={rc}', '-m', 'pytest', *ARGS]
    assert subprocess.run(run, env=env).returncode == 0
    report = subprocess.run([*coverage, 'report', f'--rcfile={rc}'],
                            env=env, capture_output=True, text=True)
print(report.stdout)
assert report.returncode == 0, 'not all statements run:\n' + report.stdout
print('all statements run')
"""


@pytest.mark.slow
def test_pyg_test_runs_every_statement_of_the_layer(pyg_checks):
    # The PR's test runs each statement of the layer (PyG's CI reports the
    # coverage of a PR's lines): each error path, sparse layout and
    # aggregation.
    pytest.importorskip('coverage')
    assert 'statements run' in _check_part(pyg_checks, 'coverage')


# The contrib pull request ####################################################


def test_contrib_pr_files(contrib, pristine, layer):
    tree, first = contrib
    assert _snapshot(tree) == first
    assert _changed(tree, pristine) == {
        CONTRIB_LAYER,
        CONTRIB_TEST,
        CONTRIB_INIT,
        CHANGELOG,
    }
    assert tree.joinpath(CONTRIB_LAYER).read_text() == layer.read_text()
    assert tree.joinpath(CONTRIB_INIT).read_text() == (
        'from .gate_conv import GATEConv\n'
        '\n'
        '__all__ = classes = [\n'
        "    'GATEConv',\n"
        ']\n'
    )
    test = tree.joinpath(CONTRIB_TEST).read_text()
    expected = TEMPLATE.read_text().replace(
        'from torch_geometric.nn import GATEConv, GATv2Conv\n',
        'from torch_geometric.contrib.nn.conv import GATEConv\n'
        'from torch_geometric.nn import GATv2Conv\n',
    )
    assert test != TEMPLATE.read_text() and test == expected
    added = _unreleased(tree, 'Added')
    assert added.startswith(
        '- Added `torch_geometric.contrib.nn.conv.GATEConv`, the graph'
    )


CONTRIB_EXPORTS = r"""
import torch_geometric.nn
from torch_geometric.contrib.nn import GATEConv
from torch_geometric.contrib.nn.conv.gate_conv import GATEConv as Layer

assert GATEConv is Layer
assert not hasattr(torch_geometric.nn, 'GATEConv')
print('exports ok')
"""


@pytest.fixture(scope='module')
def contrib_route_checks(tmp_path_factory, layer) -> dict:
    r"""The exports check, the AttentiveFP checkpoint check and PyG's tests
    in one tree with both pull requests of the contrib route applied, the
    layer into ``contrib`` and the AttentiveFP rename (one interpreter)."""
    tree, original = _extract_keeping_attentive_fp(
        tmp_path_factory.mktemp('contrib-route')
    )
    assert make_pr.main([str(tree), '--contrib', '--source', str(layer)]) == 0
    assert make_pr.main([str(tree), '--rename-attentivefp']) == 0
    checkpoints = f'PATH = {str(original)!r}\n' + ATTENTIVE_FP_CHECK
    tests = ['test/contrib/nn', 'test/nn/models/test_attentive_fp.py']
    return _run_parts(
        tree,
        ('exports', 'script', CONTRIB_EXPORTS),
        ('checkpoints', 'script', checkpoints),
        ('pytest', 'pytest', tests),
    )


@pytest.mark.slow
def test_contrib_pr_passes_pyg_tests(contrib_route_checks):
    output = _check_pytest(contrib_route_checks, 'pytest')
    assert 'test_gate_conv.py' in output
    assert 'exports ok' in _check_part(contrib_route_checks, 'exports')


def test_other_home_is_refused(pyg, layer):
    tree, first = pyg
    assert make_pr.main([str(tree), '--contrib', '--source', str(layer)]) == 1
    assert _snapshot(tree) == first


# The AttentiveFP rename ######################################################


def test_rename_pr_files(renamed, pristine):
    tree, _, first = renamed
    assert _snapshot(tree) == first
    assert _changed(tree, pristine) == {ATTENTIVE_FP, CHANGELOG}
    attentive_fp = tree.joinpath(ATTENTIVE_FP).read_text()
    assert 'class GATEConv(' not in attentive_fp
    assert attentive_fp.count('class _AttentiveFPGATEConv(') == 1
    assert all(len(line) <= 79 for line in attentive_fp.splitlines())
    changed = _unreleased(tree, 'Changed')
    assert changed.startswith(
        '- Renamed the internal `GATEConv` layer of `AttentiveFP` to '
        '`_AttentiveFPGATEConv`'
    )
    assert changed.splitlines()[0].endswith(f'([#XXXX]({PR_URL}XXXX))')


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


@pytest.mark.slow
def test_attentive_fp_rename_keeps_checkpoints(contrib_route_checks):
    out = _check_part(contrib_route_checks, 'checkpoints')
    assert 'state dicts and outputs equal' in out
    _check_pytest(contrib_route_checks, 'pytest')


# Refusals: nothing is written ################################################


def test_layer_with_kernel_hand_off_is_refused(fresh, layer, tmp_path):
    before = _snapshot(fresh)
    text = layer.read_text()
    cases = {
        'marker': (
            text.replace(
                '\nclass GATEConv(',
                '\n# gate-kernels: begin\nclass GATEConv(',
                1,
            ),
            'gate-kernels markers',
        ),
        'ours': (
            'from torch_geometric_gate.ops import attend\n' + text,
            'imports torch_geometric_gate',
        ),
        'ours in a function': (
            text.replace(
                '    def reset_parameters(self):\n',
                '    def reset_parameters(self):\n'
                '        import torch_geometric_gate\n',
                1,
            ),
            'imports torch_geometric_gate',
        ),
        'other package': (
            'import torch_scatter\n' + text,
            'or another package',
        ),
        'no class': (
            text.replace('class GATEConv(', 'class Other('),
            "no 'class GATEConv'",
        ),
    }
    for name, (source, message) in cases.items():
        assert source != text, name
        path = tmp_path / f'{name}.py'
        path.write_text(source)
        with pytest.raises(make_pr.PRError, match=message):
            make_pr.make_pr(fresh, source=path)
        assert make_pr.main([str(fresh), '--source', str(path)]) == 1
        assert _snapshot(fresh) == before, name


def test_unrewritable_template_import_changes_no_file(
    fresh, layer, tmp_path, monkeypatch
):
    before = _snapshot(fresh)
    for line, message in [
        (
            'from torch_geometric_gate import GATEConv, attention_kernel',
            "mention 'torch_geometric_gate'",
        ),
        (
            'from torch_geometric.nn.conv.gate_conv import GATEConv',
            'cannot rewrite',
        ),
    ]:
        template = tmp_path / 'test_gate_conv.py'
        template.write_text(
            TEMPLATE.read_text().replace(
                'from torch_geometric.nn import GATEConv, GATv2Conv',
                f'from torch_geometric.nn import GATv2Conv\n{line}',
            )
        )
        monkeypatch.setattr(make_pr, 'TEST_TEMPLATE', template)
        for contrib in (False, True):
            with pytest.raises(make_pr.PRError, match=message):
                make_pr.make_pr(fresh, contrib=contrib, source=layer)
        assert _snapshot(fresh) == before


def test_unrewritable_attentive_fp_import_changes_no_file(fresh, capsys):
    # The old make_pr.py had written six files when it met the second one:
    models = fresh / 'test' / 'nn' / 'models'
    head = 'from torch_geometric.nn.models.attentive_fp import GATEConv'
    (models / 'test_a_rewritable.py').write_text(f'{head}\n')
    (models / 'test_z_unrewritable.py').write_text(f'{head} as Old\n')
    before = _snapshot(fresh)
    assert make_pr.main([str(fresh), '--rename-attentivefp']) == 1
    err = capsys.readouterr().err
    assert 'test_z_unrewritable.py uses attentive_fp.GATEConv' in err
    assert _snapshot(fresh) == before

    (models / 'test_z_unrewritable.py').unlink()
    assert make_pr.main([str(fresh), '--rename-attentivefp']) == 0
    assert (models / 'test_a_rewritable.py').read_text() == (
        'from torch_geometric.nn.models.attentive_fp import '
        '_AttentiveFPGATEConv\n'
    )


def test_failed_write_lists_what_was_written(tmp_path, monkeypatch):
    files = {Path('a.py'): 'a', Path('b', 'c.py'): 'c', Path('d.py'): 'd'}
    write_text = Path.write_text

    def failing(self, *args, **kwargs):
        if self.name == 'd.py':
            raise PermissionError('read-only')
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, 'write_text', failing)
    with pytest.raises(make_pr.PRError) as info:
        make_pr.write(tmp_path, files)
    message = str(info.value)
    assert 'writing d.py failed' in message and 'read-only' in message
    assert message.endswith('written before: a.py, b/c.py')
    assert (tmp_path / 'a.py').read_text() == 'a'


@pytest.mark.parametrize(
    'number', ['12](evil) [x', '0', '-3', '1.5', '012', '']
)
def test_pr_number_must_be_a_positive_integer(fresh, number, capsys):
    before = _snapshot(fresh)
    for mode in ([], ['--rename-attentivefp']):
        with pytest.raises(SystemExit) as info:
            make_pr.main([str(fresh), '--pr', number, *mode])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert 'expected a positive integer (the pull request number)' in err
        assert repr(number) in err
    assert _snapshot(fresh) == before
    with pytest.raises(make_pr.PRError, match='positive integer'):
        make_pr.changelog('', rename.RENAME_ENTRY, number)


def test_source_is_refused_with_the_rename(fresh, layer, capsys):
    before = _snapshot(fresh)
    args = [str(fresh), '--rename-attentivefp', '--source', str(layer)]
    with pytest.raises(SystemExit) as info:
        make_pr.main(args)
    assert info.value.code == 2
    assert 'not of --rename-attentivefp' in capsys.readouterr().err
    assert _snapshot(fresh) == before


def test_rewrite_imports():
    text = (
        'from torch_geometric.nn import GATEConv, GATv2Conv\n'
        '    >>> from torch_geometric_gate import GATEConv\n'
        'from torch_geometric.nn.conv import MessagePassing\n'
        'from torch_geometric_gate import GATEConv, attention_kernel\n'
    )
    assert make_pr.rewrite_imports(text, 'torch_geometric.nn') == (
        'from torch_geometric.nn import GATEConv, GATv2Conv\n'
        '    >>> from torch_geometric.nn import GATEConv\n'
        'from torch_geometric.nn.conv import MessagePassing\n'
        'from torch_geometric_gate import GATEConv, attention_kernel\n'
    )
    assert make_pr.rewrite_imports(
        text, 'torch_geometric.contrib.nn.conv'
    ) == (
        'from torch_geometric.contrib.nn.conv import GATEConv\n'
        'from torch_geometric.nn import GATv2Conv\n'
        '    >>> from torch_geometric.contrib.nn.conv import GATEConv\n'
        'from torch_geometric.nn.conv import MessagePassing\n'
        'from torch_geometric_gate import GATEConv, attention_kernel\n'
    )


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
