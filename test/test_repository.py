import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import torch

import torch_geometric_gate

ROOT = Path(__file__).resolve().parent.parent


def readme_commands():
    block = re.search(
        r'```bash\n(.*?)```', (ROOT / 'README.md').read_text(), re.S
    ).group(1)
    return [
        line
        for line in block.splitlines()
        if line and not line.startswith('#')
    ]


def test_readme_opens_with_the_two_commands():
    main_job, tests = readme_commands()
    for command in (main_job, tests):
        assert command.startswith('python3 -m venv .venv')
        assert 'pip install torch==2.13.0' in command  # CPU wheel pin
    assert command.endswith('python -m pytest -n auto')  # pytest-xdist
    assert (ROOT / main_job.split('python ')[-1]).is_file()


def test_ci_runs_exactly_the_readme_test_command():
    _, tests = readme_commands()
    ci = (ROOT / '.ci' / 'run').read_text().splitlines()
    assert tests in ci


def test_readme_and_install_page_agree_on_the_torch_index():
    # On the public index `pip install torch==...` resolves the CUDA wheel;
    # the README and the installation page name the same CPU index for it.
    def index_urls(path):
        text = path.read_text().replace('`', ' ')
        return set(re.findall(r'--index-url\s+(\S+)', text))

    readme = index_urls(ROOT / 'README.md')
    install = index_urls(ROOT / 'docs' / 'source' / 'install.rst')
    assert 'https://download.pytorch.org/whl/cpu' in readme
    assert readme <= install, readme - install


def test_version_lives_in_one_place():
    tomllib = pytest.importorskip('tomllib')  # Python >= 3.11
    meta = tomllib.loads((ROOT / 'pyproject.toml').read_text())
    assert 'version' in meta['project']['dynamic']
    assert 'version' not in meta['project']
    assert re.fullmatch(
        r'\d+\.\d+\.\d+(\.dev\d+)?', torch_geometric_gate.__version__
    )
    assert (ROOT / 'torch_geometric_gate' / 'py.typed').is_file()


def test_version_follows_the_changelog():
    # The released versions are the CHANGELOG's headings; while its
    # [Unreleased] section lists changes, the code is a development version
    # after the newest release, not that release's number.
    from packaging.version import Version

    text = (ROOT / 'CHANGELOG.md').read_text()
    released = re.findall(r'^## \[(\d[^\]]*)\]', text, re.M)
    unreleased = re.search(
        r'^## \[Unreleased\]\n(.*?)^## \[', text, re.M | re.S
    )
    version = Version(torch_geometric_gate.__version__)
    newest = max(map(Version, released))
    if unreleased is not None and unreleased.group(1).strip():
        assert version.is_devrelease and version > newest, (version, newest)
    else:
        assert version == newest


def test_install_page_names_what_each_extra_installs():
    # The install page's table of extras names each package of an extra
    # and every version bound it sets (a user reads there what
    # `pip install ".[test]"` does to their environment).
    tomllib = pytest.importorskip('tomllib')  # Python >= 3.11
    from packaging.requirements import Requirement

    meta = tomllib.loads((ROOT / 'pyproject.toml').read_text())
    extras = meta['project']['optional-dependencies']
    table = (ROOT / 'docs' / 'source' / 'install.rst').read_text()
    table = table.split('.. list-table::')[-1].split('\n\n', 2)[1]
    rows = dict(re.findall(r'\* - ``(\w+)``\n\s+- (.*?)(?=\n\s+\* - |$)',
                           table, re.S))  # fmt: skip
    assert set(rows) == set(extras)
    missing = []
    for extra, requirements in extras.items():
        row = ' '.join(rows[extra].split()).lower()
        for requirement in map(Requirement, requirements):
            if requirement.name == meta['project']['name']:
                continue  # `dev`: "all of the above"
            named = str(requirement.specifier) or requirement.name
            if requirement.name.lower() not in row or named not in row:
                missing.append(f'{extra}: {requirement}')
    assert missing == []


def test_public_imports():
    from torch_geometric_gate import GATEConv
    from torch_geometric_gate.nn import GATEConv as GATEConv2

    assert GATEConv is GATEConv2


def test_api_pages_written_by_hand_document_every_exported_name():
    # A page with `.. module:: X` but no `gate-autosummary:: X` lists X's
    # objects by hand: each name of X.__all__ needs an entry there (or on
    # another API page, under any public path).
    import importlib

    def resolve(path):
        parts = path.split('.')
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module('.'.join(parts[:i]))
            except ImportError:
                continue
            for part in parts[i:]:
                obj = getattr(obj, part)
            return obj

    entry = re.compile(
        r'^\.\. (?:auto)?(?:class|function|data|exception)::\s*(\S+)', re.M
    )
    documented, by_hand = set(), []
    for page in (ROOT / 'docs' / 'source' / 'api').glob('*.rst'):
        text = page.read_text()
        module = re.search(r'^\.\. module::\s*(\S+)', text, re.M)
        for target in entry.findall(text):
            if '.' not in target and module:
                target = f'{module.group(1)}.{target}'
            documented.add(id(resolve(target)))
        if module and f'gate-autosummary:: {module.group(1)}' not in text:
            by_hand.append(module.group(1))
    assert 'torch_geometric_gate.ops' in by_hand
    missing = [
        f'{name}.{public}'
        for name in by_hand
        for public in importlib.import_module(name).__all__
        if id(getattr(importlib.import_module(name), public)) not in documented
    ]
    assert missing == []


def test_readme_usage_snippet_runs():
    snippet = re.search(
        r'```python\n(.*?)```', (ROOT / 'README.md').read_text(), re.S
    ).group(1)
    scope = {}
    exec(snippet, scope)
    assert scope['out'].shape == (100, 128)  # as its comments say
    assert scope['alpha_vv'].shape == (100, 4)


def test_ci_has_the_sparse_accelerators():
    # CI installs the `[sparse]` extra so that the `SparseTensor` and
    # mini-batch loader tests run there instead of skipping; fail loudly if
    # that install silently degrades.
    if os.environ.get('CI', '').lower() not in ('1', 'true'):
        pytest.skip('only checked in CI (CI=true)')
    import torch_geometric.typing as pyg_typing
    from torch_geometric.data import Data

    assert pyg_typing.WITH_TORCH_SCATTER
    assert pyg_typing.WITH_TORCH_SPARSE
    from torch_geometric.loader import NeighborLoader

    data = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    batch = next(iter(NeighborLoader(data, num_neighbors=[1], batch_size=1)))
    assert batch.num_nodes == 2


def test_no_code_outside_the_tests_edits_sys_path():
    # Scripts, examples, benchmarks, the docs and the paper's package import
    # installed packages (the editable install puts the repository's
    # top-level packages on the path), never each other through sys.path.
    offenders = []
    for path in ROOT.rglob('*.py'):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in {'test', 'build', 'dist'} or any(
            part.startswith('.') for part in rel.parts
        ):
            continue
        if 'docs' in rel.parts and 'build' in rel.parts:
            continue
        text = path.read_text()
        if re.search(r'\bsys\.path\b', text):
            offenders.append(str(rel))
    assert offenders == [], f'sys.path edited in {offenders}'


def test_sdist_holds_every_file_of_the_repository(tmp_path, monkeypatch):
    # The sdist ships test/ and docs/source/, so what they read must be in
    # it too: without upstream/ and .ci/run, `pytest` in an unpacked sdist
    # stopped at collection (test/upstream, test/test_docs_commands.py).
    buildapi = pytest.importorskip('flit_core.buildapi')
    if shutil.which('git') is None or not (ROOT / '.git').exists():
        pytest.skip('needs a git checkout of the repository')
    tracked = subprocess.run(
        ['git', 'ls-files', '-z'],
        cwd=ROOT,
        capture_output=True,
        check=True,
        text=True,
    ).stdout.split('\0')
    tracked = {name for name in tracked if name and (ROOT / name).is_file()}
    monkeypatch.chdir(ROOT)  # flit_core reads ./pyproject.toml
    sdist = tmp_path / buildapi.build_sdist(str(tmp_path))
    with tarfile.open(sdist) as tar:
        shipped = {
            member.name.split('/', 1)[1]
            for member in tar.getmembers()
            if member.isfile()
        }
    # The only files it leaves out on purpose:
    assert tracked - shipped == {'.gitignore'}
