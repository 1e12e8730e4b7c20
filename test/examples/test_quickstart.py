r"""README.md quotes the table of `examples/quickstart.py`; these tests keep
the quote regenerated from a run: `python examples/quickstart.py --readme`
prints the block to paste.
"""

import importlib.util
import os
import os.path as osp
import re
import subprocess
import sys

import pytest
import torch

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SCRIPT = osp.join(ROOT, 'examples', 'quickstart.py')
# The full run takes about 20 s on one CPU core, but its last digits may
# differ on another CPU or math library than the one that made the README's
# numbers: set this variable there (before a release), not in CI.
CHECK_ENV = 'GATE_CHECK_README_QUICKSTART'


def _readme_block():
    with open(osp.join(ROOT, 'README.md')) as f:
        readme = f.read()
    match = re.search(r'\n```\n(model .*?)\n```', readme, re.S)
    assert match, 'README.md lost the quick-start table'
    return match.group(1)


def _quickstart():
    pytest.importorskip('tqdm')
    spec = importlib.util.spec_from_file_location('quickstart', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_quotes_the_readme_flag_format():
    # Rebuild the README's table from the numbers it shows, with the
    # script's own formatting: a hand-edited or trimmed-by-hand table, or a
    # change of the script's output, fails here.
    block = _readme_block()
    results = {}
    for line in block.splitlines()[1:]:
        name, loss, train_acc, test_acc, *layers = line.split()
        alphas = [torch.tensor([float(a)]) for a in layers[1::2]]
        accs = (float(train_acc), float(test_acc))
        results[name] = (float(loss), accs, alphas, 0.0)
    assert list(results) == ['GATE', 'GATv2']
    assert _quickstart().format_table(results, readme=True) == block


@pytest.mark.skipif(
    os.environ.get(CHECK_ENV) != '1',
    reason=f'reruns the whole quick start (about 20 s on one CPU core); '
    f'set {CHECK_ENV}=1',
)
def test_readme_quotes_a_fresh_run():  # pragma: no cover
    pytest.importorskip('tqdm')
    proc = subprocess.run(
        [sys.executable, SCRIPT, '--readme'],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == _readme_block(), (
        'README.md quotes another run of examples/quickstart.py: paste the '
        'output of `python examples/quickstart.py --readme`'
    )


@pytest.mark.slow
def test_one_thread_unless_told():
    # The printed numbers depend on torch's thread count (the sums of
    # parallel CPU kernels): the script fixes it at one, whatever the
    # environment says, unless --threads does.
    pytest.importorskip('tqdm')
    small = ['--num-nodes', '60', '--num-layers', '2', '--hidden', '4',
             '--epochs', '2']  # fmt: skip
    proc = subprocess.run(
        [sys.executable, SCRIPT, *small],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='2'),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert '; 1 CPU thread(s).' in proc.stdout
    assert re.search(r'^GATv2 ', proc.stdout, re.M)
    assert _quickstart().parse_args(['--threads', '2']).threads == 2


def test_generated_graph_leaves_no_folder(tmp_path, monkeypatch):
    # The graph was generated into a `tempfile.mkdtemp()` folder that was
    # never removed: one more per run.
    import tempfile

    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
    data = _quickstart().make_graph(40, 0.1, 4, seed=0)
    assert data.num_nodes == 40 and data.x.size(1) == 4
    assert list(tmp_path.iterdir()) == []


def test_readme_flag_prints_the_table_only(monkeypatch, capsys):
    # The dataset printed 'Processing...' and 'Done!' around the table.
    module = _quickstart()
    monkeypatch.delenv('PYTEST_CURRENT_TEST')  # which silences the lines
    small = ['--num-nodes', '40', '--num-layers', '1', '--hidden', '4',
             '--epochs', '1']  # fmt: skip
    monkeypatch.setattr(sys, 'argv', [SCRIPT, '--readme', *small])
    threads = torch.get_num_threads()
    try:
        module.main()
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr()
    assert out.err == ''
    assert out.out.startswith('model ') and len(out.out.splitlines()) == 3

    # Without --readme, the dataset says that it generates the graph:
    data = module.make_graph(40, 0.1, 4, seed=0)
    assert data.num_nodes == 40
    assert 'Processing...' in capsys.readouterr().err


def test_docs_give_the_threads_flag_not_the_environment():
    # The script pins torch's thread count (--threads, default 1) whatever
    # OMP_NUM_THREADS says (test_one_thread_unless_told); the install and
    # quick-start pages told to set OMP_NUM_THREADS=1 to make it fast.
    for page in ('install.rst', 'quickstart.rst'):
        with open(osp.join(ROOT, 'docs', 'source', page)) as f:
            paragraphs = f.read().split('\n\n')
        about = [
            p for p in paragraphs if 'README' in p and 'thread' in p.lower()
        ]
        assert about, page
        for paragraph in about:
            assert '--threads' in paragraph, paragraph
            assert 'OMP_NUM_THREADS=1' not in paragraph, paragraph


def test_the_table_says_what_its_times_include(monkeypatch, capsys):
    # GATE's time includes the compilation of its kernels on their first
    # call: about half of it at the default sizes on one CPU thread, which
    # made GATE look as slow as GATv2 (it is about twice as fast after).
    module = _quickstart()
    small = ['--num-nodes', '40', '--num-layers', '1', '--hidden', '4',
             '--epochs', '1']  # fmt: skip
    monkeypatch.setattr(sys, 'argv', [SCRIPT, *small])
    threads = torch.get_num_threads()
    try:
        module.main()
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert re.search(r'^GATE .* \d+\.\ds ', out, re.M), out
    assert out.strip().endswith(
        "time: the training's wall time; GATE's includes compiling its "
        'attention kernels on their first call (seconds, once per process).'
    )
