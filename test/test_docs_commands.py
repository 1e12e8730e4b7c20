"""Every command that README.md, the docs pages, the packages' READMEs and
the committed benchmark results cite runs.

The commands are read from the Markdown files' fenced and inline code and
from the code blocks, literal blocks and inline literals of
``docs/source/*.rst``.
Each ``python SCRIPT``, ``python -m MODULE`` (a module of this repository),
``torchrun ... SCRIPT`` and ``bash SCRIPT`` must name a file or module that
exists; a Python script or module must parse its arguments (``--help``
exits 0), know every ``--flag`` the docs give it and accept the command as
cited (its argument parser takes every value: ``test/parse_only.py`` runs
it up to the parse), and a script without an argument parser must compile
and import what it imports. A shell script must pass ``bash -n``. Commands
with a placeholder (``DATASET``, ``<cuda-tag>``, ``${TORCH}``) are left
out.
"""

import ast
import importlib.util
import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from script_testing import module, run_in_one_interpreter, script

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / 'docs' / 'source'
# Packages of this repository that `python -m` may name.
LOCAL_PACKAGES = (
    'torch_geometric_gate',
    'gate_paper',
    'benchmark',
    'upstream',
)
PYTHONS = {'python', 'python3'}
ENV_ASSIGNMENT = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*=')
PLACEHOLDER = re.compile(r'<[^<>]*>|\$\{|\.\.\.|^[A-Z][A-Z0-9_]{2,}$')


@dataclass(frozen=True)
class Command:
    kind: str  # 'script' (python or torchrun), 'module' or 'bash'
    target: str  # the script's path or the module's name
    args: tuple  # the arguments given to the script or module
    text: str  # the command as cited
    source: str  # where it is cited


def _code_texts(path):
    """Yields the code of ``path`` that may hold shell commands."""
    text = path.read_text()
    if path.suffix == '.md':
        for block in re.findall(
            r'```(?:bash|sh|shell|console)?\n(.*?)```', text, re.S
        ):
            yield block
        text = re.sub(r'```.*?```', '', text, flags=re.S)
        yield from map(_one_line, re.findall(r'`([^`]+)`', text))
        return
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        directive = re.match(r'\s*\.\. code-block::\s*(\w*)', line)
        if directive:
            literal = directive.group(1) in ('bash', 'sh', 'shell', 'console')
        else:  # a paragraph that ends with '::' starts a literal block
            literal = line.rstrip().endswith(
                '::'
            ) and not line.lstrip().startswith('..')
        if literal:
            indent = len(line) - len(line.lstrip())
            block = []
            i += 1
            while i < len(lines) and (
                not lines[i].strip()
                or len(lines[i]) - len(lines[i].lstrip()) > indent
            ):
                if not lines[i].lstrip().startswith(':'):  # not an option
                    block.append(lines[i])
                i += 1
            yield '\n'.join(block)
        else:
            i += 1
    yield from map(_one_line, re.findall(r'``([^`]+)``', text))


def _one_line(literal):
    # An inline literal wrapped in the source reads as one line.
    return ' '.join(literal.split())


def _segments(code):
    """Splits code into simple commands: continuation lines joined, then cut
    at ``&&``, ``||``, ``;``, ``|`` and newlines."""
    code = re.sub(r'\\\n\s*', ' ', code)
    for line in code.splitlines():
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:  # an unbalanced quote: not a shell command
            continue
        segment = []
        for token in tokens + ['&&']:
            if token in ('&&', '||', ';', '|'):
                if segment:
                    yield segment
                segment = []
            else:
                segment.append(token)


def parse_command(tokens, text='', source=''):
    """The :class:`Command` of one simple command, or :obj:`None` if it
    runs no script or module of this repository."""
    while tokens and ENV_ASSIGNMENT.match(tokens[0]):
        tokens = tokens[1:]
    if not tokens:
        return None
    program = tokens[0].rsplit('/', 1)[-1]
    rest = tokens[1:]
    if program in PYTHONS and rest[:2] == ['-m', 'torch.distributed.run']:
        program, rest = 'torchrun', rest[2:]
    if program == 'torchrun':
        scripts = [i for i, t in enumerate(rest) if t.endswith('.py')]
        if not scripts:
            return None
        i = scripts[0]
        command = Command(
            'script', rest[i], tuple(rest[i + 1 :]), text, source
        )
    elif program in PYTHONS:
        if not rest or rest[0] == '-c':
            return None
        if rest[0] == '-m':
            if len(rest) < 2 or not rest[1].startswith(LOCAL_PACKAGES):
                return None  # pytest, sphinx, venv, pip: not ours
            command = Command('module', rest[1], tuple(rest[2:]), text, source)
        elif rest[0].endswith('.py'):
            command = Command('script', rest[0], tuple(rest[1:]), text, source)
        else:
            return None
    elif program == 'bash' and rest and rest[0].endswith('.sh'):
        command = Command('bash', rest[0], tuple(rest[1:]), text, source)
    else:
        return None
    if any(PLACEHOLDER.search(t) for t in (command.target,) + command.args):
        return None
    return command


def cited_commands():
    # The docs, the packages' READMEs and the commands the committed
    # results record (each must still run as written):
    sources = [ROOT / 'README.md'] + sorted(DOCS.glob('*.rst'))
    sources += [
        ROOT / 'gate_paper' / 'README.md',
        ROOT / 'upstream' / 'README.md',
    ]
    sources += sorted((ROOT / 'benchmark' / 'results').glob('*.md'))
    commands = []
    for path in sources:
        for code in _code_texts(path):
            for tokens in _segments(code):
                command = parse_command(
                    tokens, ' '.join(tokens), str(path.relative_to(ROOT))
                )
                if command is not None and command not in commands:
                    commands.append(command)
    return commands


COMMANDS = cited_commands()
TARGETS = sorted({(c.kind, c.target) for c in COMMANDS})


def _flags(args):
    """The ``--flags`` of ``args``, up to a ``--`` that passes the rest on."""
    args = list(args)
    if '--' in args:
        args = args[: args.index('--')]
    return sorted({a.split('=', 1)[0] for a in args if a.startswith('--')})


def _environment():
    return dict(
        os.environ,
        OMP_NUM_THREADS='1',
        PYTHONPATH=os.pathsep.join(
            [str(ROOT)] + os.environ.get('PYTHONPATH', '').split(os.pathsep)
        ).rstrip(os.pathsep),
    )


def _parsed(kind, target):
    # A module, or a script with an argument parser.
    return kind == 'module' or (
        kind == 'script' and _uses_argparse(ROOT / target)
    )


@pytest.fixture(scope='module')
def helps():
    r""":obj:`target: (exit code, stdout, stderr)` of every cited Python
    script's and module's :obj:`--help`, all in one process forked from a
    warm interpreter (no import of torch per target)."""
    targets = [(k, t) for k, t in TARGETS if _parsed(k, t)]
    invocations = [
        (module if kind == 'module' else script)(target, '--help')
        for kind, target in targets
    ]
    results = run_in_one_interpreter(invocations, env=_environment(), cwd=ROOT)
    return {
        target: (r.returncode, r.stdout, r.stderr)
        for (_, target), r in zip(targets, results)
    }


@pytest.fixture(scope='module')
def parses():
    r""":obj:`command: (exit code, stderr)` of every cited command of a
    Python script or module with an argument parser, run up to the parse
    of its arguments (``test/parse_only.py``), in one forked process."""
    commands = [c for c in COMMANDS if _parsed(c.kind, c.target)]
    commands = list(
        dict.fromkeys((c.kind, c.target, c.args) for c in commands)
    )
    invocations = [
        script(ROOT / 'test' / 'parse_only.py', kind, target, *args)
        for kind, target, args in commands
    ]
    results = run_in_one_interpreter(invocations, env=_environment(), cwd=ROOT)
    return {
        command: (r.returncode, r.stderr)
        for command, r in zip(commands, results)
    }


def _uses_argparse(path):
    return 'ArgumentParser' in path.read_text()


def test_parse_command():
    def parse(line):
        (tokens,) = _segments(line)
        return parse_command(tokens)

    command = parse(
        'OMP_NUM_THREADS=1 python benchmark/pair.py \\\n'
        '    --graphs cora --heads 1 8'
    )
    assert command.kind == 'script'
    assert command.target == 'benchmark/pair.py'
    assert _flags(command.args) == ['--graphs', '--heads']
    command = parse(
        'torchrun --standalone --nproc-per-node 2 '
        'examples/distributed.py --epochs=5'
    )
    assert (command.target, command.args) == (
        'examples/distributed.py',
        ('--epochs=5',),
    )
    assert _flags(command.args) == ['--epochs']
    command = parse('python benchmark/a.py --reps 3 -- --datasets Cora')
    assert _flags(command.args) == ['--reps']
    command = parse('python -m gate_paper.table1 --quick')
    assert (command.kind, command.target) == ('module', 'gate_paper.table1')
    assert parse('OUT=x bash benchmark/gpu_session.sh').kind == 'bash'
    for line in (
        'python -m pytest',
        'python -c "print(1)"',
        'python3 -m venv .venv',
        'pip install torch==2.13.0',
        'python upstream/make_pr.py PYG_DIR',
        'python examples/ogbn.py --dataset <name>',
    ):
        assert parse(line) is None, line
    chain = list(_segments('pip install -e . && python examples/a.py'))
    assert [parse_command(t).target for t in chain[1:]] == ['examples/a.py']


def test_commands_are_found():
    # The README's main job is a cited command; so is a docs page's.
    targets = {c.target for c in COMMANDS}
    assert 'examples/quickstart.py' in targets
    assert any(c.source.startswith('docs/') for c in COMMANDS)


@pytest.mark.parametrize('kind,target', TARGETS, ids=[t for _, t in TARGETS])
def test_cited_target_exists(kind, target):
    cited = [c.source for c in COMMANDS if c.target == target]
    if kind == 'module':
        found = importlib.util.find_spec(target.split('.')[0]) is not None
        if found:
            found = importlib.util.find_spec(target) is not None
        assert found, f'module {target} (cited in {cited}) not found'
    else:
        assert (ROOT / target).is_file(), (
            f'{target} (cited in {sorted(set(cited))}) does not exist'
        )


@pytest.mark.slow
@pytest.mark.parametrize('kind,target', TARGETS, ids=[t for _, t in TARGETS])
def test_cited_command_parses_its_arguments(kind, target, helps):
    commands = [c for c in COMMANDS if c.target == target]
    if kind == 'module':
        if importlib.util.find_spec(target.split('.')[0]) is None:
            pytest.fail(f'module {target} not found')
    elif not (ROOT / target).is_file():
        pytest.fail(f'{target} does not exist')
    if kind == 'bash':
        result = subprocess.run(
            ['bash', '-n', str(ROOT / target)], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        return
    if kind == 'script' and not _uses_argparse(ROOT / target):
        # No argument parser: `--help` would run the script. It must
        # compile and find every module it imports.
        for command in commands:
            assert not command.args, (
                f'{target} takes no arguments, cited as {command.text!r}'
            )
        tree = ast.parse((ROOT / target).read_text(), target)
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            for name in names:
                assert importlib.util.find_spec(name) is not None, (
                    f'{target} imports {name}, which is not installed'
                )
        return
    code, stdout, stderr = helps[target]
    assert code == 0, f'{target} --help failed:\n{stderr[-3000:]}'
    known = set(re.findall(r'--[A-Za-z0-9][A-Za-z0-9-]*', stdout))
    for command in commands:
        unknown = [f for f in _flags(command.args) if f not in known]
        assert not unknown, (
            f'{command.source} cites {command.text!r}: {target} does not '
            f'know {unknown}'
        )


@pytest.mark.slow
@pytest.mark.parametrize('kind,target', TARGETS, ids=[t for _, t in TARGETS])
def test_cited_command_takes_its_values(kind, target, parses):
    # `--help` shows the flags, not whether the values cited parse (a
    # choice, a number, a positional argument).
    if not _parsed(kind, target):
        pytest.skip('no argument parser')
    for command in (c for c in COMMANDS if c.target == target):
        code, stderr = parses[(command.kind, command.target, command.args)]
        assert code == 0, (
            f'{command.source} cites {command.text!r}, which does not '
            f'parse:\n{stderr[-3000:]}'
        )


def test_a_wrapped_inline_literal_is_one_command(tmp_path):
    page = tmp_path / 'page.rst'
    page.write_text('Run ``python docs/a.py --paper-data\n    data/x``.\n')
    commands = [
        parse_command(tokens)
        for code in _code_texts(page)
        for tokens in _segments(code)
    ]
    assert [(c.target, c.args) for c in commands if c] == [
        ('docs/a.py', ('--paper-data', 'data/x'))
    ]
