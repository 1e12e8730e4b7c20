r"""The shared experiment module of the example scripts
(``examples/_experiment.py``): metrics on the device, the results CSV and
the task runner (``--jobs``, ``--resume``), once for every script."""

import csv
import os
import os.path as osp
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
EXAMPLES = osp.join(ROOT, 'examples')
sys.path.insert(0, EXAMPLES)
import _experiment as ex  # noqa: E402

sys.path.remove(EXAMPLES)

# A script with the runner and runs that take `seconds` each (task 'boom'
# raises), so that the runner's behaviour is tested in real processes.
DRIVER = textwrap.dedent(
    """
    import argparse, sys, time
    from dataclasses import dataclass, fields
    sys.path.insert(0, {examples!r})
    import _experiment as ex

    @dataclass(frozen=True)
    class Task:
        dataset: str
        source: str
        model: str
        num_layers: int
        seconds: float

        def cost(self):
            return 0.0

    @dataclass(frozen=True)
    class Result(Task):
        epochs_run: int
        wall_s: float
        threads: int

        @property
        def task(self):
            names = [f.name for f in fields(Task)]
            return Task(**{{n: getattr(self, n) for n in names}})

    def run_one(task, pbar=None):
        end = time.time() + task.seconds
        while time.time() < end:
            time.sleep(0.05)
        if task.model.startswith('boom'):
            raise RuntimeError('boom')
        return Result(**vars(task), epochs_run=1, wall_s=task.seconds,
                      threads=ex.torch.get_num_threads())

    if __name__ == '__main__':
        parser = argparse.ArgumentParser()
        ex.add_runner_args(parser)
        parser.add_argument('csv')
        parser.add_argument('models', nargs='+')
        args = parser.parse_args()
        tasks = [
            Task('d', 's', m, 1, float(m.split(':')[1]) if ':' in m else 0.0)
            for m in args.models
        ]
        ex.run_tasks(tasks, run_one, args.csv, args, Result)
    """
).format(examples=EXAMPLES)


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture()
def driver(tmp_path):
    path = tmp_path / 'driver.py'
    path.write_text(DRIVER)
    csv_path = str(tmp_path / 'runs.csv')

    def start(*argv, **kwargs):
        return subprocess.Popen(
            [sys.executable, str(path), *argv[:-1], csv_path, *argv[-1]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            # A test suite started in the background (`pytest &`) ignores
            # SIGINT, and so would the runner it starts: Ctrl-C as a user
            # at a terminal sends it.
            preexec_fn=_default_sigint,
            **kwargs,
        )

    def run(*argv):
        proc = start(*argv)
        out, err = proc.communicate(timeout=120)
        return proc.returncode, err

    return start, run, csv_path


def _models(csv_path):
    if not osp.exists(csv_path):
        return []
    with open(csv_path) as f:
        return [line.split(',')[2] for line in f.read().splitlines()[1:]]


def _threads(csv_path, model):
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    return next(int(r['threads']) for r in rows if r['model'] == model)


def _wait_rows(csv_path, n, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if len(_models(csv_path)) >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f'fewer than {n} rows after {timeout} s')


def _group_gone(pgid, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    os.killpg(pgid, signal.SIGKILL)
    return False


def test_roc_auc_by_ranks_equals_sklearn_with_ties():
    from sklearn.metrics import roc_auc_score

    gen = torch.Generator().manual_seed(0)
    for n in (2, 7, 100, 1000):
        y = torch.randint(0, 2, (n,), generator=gen)
        y[0], y[1] = 0, 1
        for score in (
            torch.rand(n, generator=gen),
            torch.randint(0, 4, (n,), generator=gen).float(),  # many ties
            torch.zeros(n),  # all tied: 0.5
        ):
            assert float(ex.roc_auc(score, y)) == pytest.approx(
                roc_auc_score(y.numpy(), score.numpy()), abs=1e-12
            )
    # One class: undefined (NaN), no exception.
    assert torch.isnan(ex.roc_auc(torch.rand(5), torch.zeros(5).long()))


@pytest.mark.parametrize('how', ['sigint_group', 'sigterm_main'])
def test_interrupt_stops_every_process_and_keeps_finished_runs(driver, how):
    start, _, csv_path = driver
    proc = start('--jobs', '2', ['a:0.2', 'b:30', 'c:30', 'd:30', 'e:30'])
    _wait_rows(csv_path, 1)
    time.sleep(1)
    pgid = os.getpgid(proc.pid)
    began = time.time()
    if how == 'sigint_group':
        os.killpg(pgid, signal.SIGINT)
    else:
        os.kill(proc.pid, signal.SIGTERM)
    proc.communicate(timeout=20)
    assert time.time() - began < 10
    assert proc.returncode != 0
    assert _group_gone(pgid), 'a worker outlived the runner'
    assert _models(csv_path) == ['a:0.2']


def test_exception_in_a_worker_stops_the_run_and_keeps_finished_runs(driver):
    start, _, csv_path = driver
    proc = start('--jobs', '2', ['a:0.1', 'boom:3', 'c:30', 'd:30'])
    began = time.time()
    _, err = proc.communicate(timeout=60)
    assert time.time() - began < 30
    assert proc.returncode != 0 and 'boom' in err
    assert _group_gone(proc.pid)  # the session (group) of the runner
    assert _models(csv_path) == ['a:0.1']


def test_rerun_without_resume_is_refused(driver):
    _, run, csv_path = driver
    assert run(['a', 'b'])[0] == 0
    code, err = run(['a', 'c'])
    assert code != 0 and '--resume' in err and 'fresh --out-dir' in err
    assert _models(csv_path) == ['a', 'b']
    assert run('--resume', ['a', 'c'])[0] == 0
    assert _models(csv_path) == ['a', 'b', 'c']


def test_second_invocation_on_one_folder_is_locked_out(driver):
    start, run, csv_path = driver
    first = start(['a:3'])
    time.sleep(1.5)  # holds the lock now
    code, err = run('--resume', ['b'])
    assert code != 0 and 'another invocation' in err
    first.communicate(timeout=60)
    assert first.returncode == 0
    assert run('--resume', ['b'])[0] == 0
    assert _models(csv_path) == ['a:3', 'b']
    # A lock whose process is gone is taken over.
    with open(csv_path + '.lock', 'w') as f:
        f.write('999999999')
    assert run('--resume', ['c'])[0] == 0


def test_resume_reruns_a_cut_row_and_refuses_a_malformed_one(driver):
    _, run, csv_path = driver
    assert run(['a', 'b'])[0] == 0
    text = open(csv_path).read()
    for cut in (2, 4):  # inside the last field (the marker), or shorter
        with open(csv_path, 'w') as f:
            f.write(text[: len(text) - cut])
        code, err = run('--resume', ['a', 'b'])
        assert code == 0 and 'cut short' in err
        assert _models(csv_path) == ['a', 'b']
        assert open(csv_path).read() == text
    lines = text.splitlines()
    for bad in (
        lines[1].replace(',1,0.0,', ',x,0.0,'),  # epochs_run not a number
        lines[1] + ',extra',
    ):
        with open(csv_path, 'w') as f:
            f.write('\n'.join([lines[0], bad, lines[2]]) + '\n')
        code, err = run('--resume', ['a', 'b'])
        assert code != 0
        assert f"'{csv_path}', line 2" in err


def test_roc_auc_split_with_one_class_is_a_clear_error():
    from torch_geometric.data import Data

    y = torch.tensor([0, 1, 0, 0, 1, 1])
    masks = {
        'train_mask': torch.tensor([1, 1, 0, 0, 0, 0]),
        'val_mask': torch.tensor([0, 0, 1, 1, 0, 0]),  # class 0 only
        'test_mask': torch.tensor([0, 0, 0, 0, 1, 1]),
    }
    data = Data(y=y, **{k: v.bool().view(-1, 1) for k, v in masks.items()})
    ex.split_masks(data, 0)  # fine for accuracy
    with pytest.raises(ValueError, match='validation nodes hold only class'):
        ex.split_masks(data, 0, both_classes=True)


def test_ogbn_out_unwritable_fails_before_training(tmp_path):
    blocker = tmp_path / 'file'
    blocker.write_text('')
    proc = subprocess.run(
        [
            sys.executable,
            osp.join(EXAMPLES, 'ogbn.py'),
            '--root',
            str(tmp_path / 'no_data'),
            '--out',
            str(blocker / 'results.json'),
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=300,
    )
    assert proc.returncode == 2
    assert 'argument --out: cannot write' in proc.stderr
    assert not (tmp_path / 'no_data').exists()  # nothing loaded


@pytest.mark.parametrize(
    'argv, flag',
    [
        (['--lr', '0'], '--lr'),
        (['--compile-after', '-5'], '--compile-after'),
        (['--fagcn-eps', 'nan'], '--fagcn-eps'),
        (['--plot-splits', '42'], '--plot-splits'),
        (['--heads', '4'], '--heads'),  # the paper recipe has one head
        (['--dropout', '0.5'], '--dropout'),
    ],
)
def test_real_graphs_flags_are_checked(capsys, argv, flag):
    sys.path.insert(0, EXAMPLES)
    try:
        import real_graphs
    finally:
        sys.path.remove(EXAMPLES)
    with pytest.raises(SystemExit) as e:
        real_graphs.parse_args(argv)
    assert e.value.code == 2
    assert f'argument {flag}' in capsys.readouterr().err


def test_run_epochs_selects_and_stops_as_its_selectors_say():
    # Validation values per epoch; the loop stops 3 epochs after the best
    # (patience 3) and the selector keeps the first best epoch:
    vals = [0.1, 0.5, 0.4, 0.5, 0.3, 0.2, 0.9, 0.85]
    seen = []

    def step(epoch, observe):
        seen.append(epoch)
        if epoch % 2 == 1 or epoch > 4:  # epochs 2 and 4 measure nothing
            observe({'val': torch.tensor(vals[epoch - 1])})

    best = ex.Selector('val', 'max', patience=3)
    last = ex.Selector('val', 'last')
    ran = ex.run_epochs(step, [best, last], 8, torch.device('cpu'))
    # Measured epochs 1, 3, 5, 6, 7: best 0.4 at epoch 3, then 5 and 6 are
    # worse, 7 (0.9) is better, 8 is not: never 3 bad observations in a row.
    assert ran == len(seen) == 8
    assert best.result()['epoch'] == 7 and last.result()['epoch'] == 8
    assert best.result()['at']['val'] == pytest.approx(0.9)

    # Patience 1 stops at the first worse observation (epoch 5), and a
    # loop without stopping rules runs every epoch:
    seen.clear()
    early = ex.Selector('val', 'max', patience=1)
    assert ex.run_epochs(step, [early], 8, torch.device('cpu')) == 5
    assert early.result()['epoch'] == 3 and early.result()['stopped']
    seen.clear()
    assert ex.run_epochs(step, [], 6, torch.device('cpu')) == 6 == len(seen)


def test_stop_after_keeps_finished_runs_and_resume_goes_on(driver):
    start, run, csv_path = driver
    # Two processes: the short runs finish, the long ones are dropped at
    # the deadline (15 s), and the runner exits cleanly well before them.
    began = time.time()
    proc = start(
        '--jobs',
        '2',
        '--stop-after',
        '0.25',
        ['a:0.1', 'b:0.1', 'c:90', 'd:90'],
    )
    _, err = proc.communicate(timeout=80)
    assert proc.returncode == 0, err
    assert time.time() - began < 60
    assert 'stopped after --stop-after 0.25 minutes: 2 runs left' in err
    assert sorted(_models(csv_path)) == ['a:0.1', 'b:0.1']
    assert _group_gone(proc.pid)
    # One job: the same deadline (the run in progress then is dropped in
    # its worker process, no other starts); --resume then runs the rest.
    began = time.time()
    tasks = ['a:0.1', 'b:0.1', 'g:0.1', 'e:90', 'f:0']
    code, err = run('--resume', '--stop-after', '0.25', tasks)
    assert time.time() - began < 60
    assert code == 0 and '2 runs left' in err
    assert sorted(_models(csv_path)) == ['a:0.1', 'b:0.1', 'g:0.1']
    # Its worker has the threads a run in the main process would have (the
    # two-job runs one each):
    default = subprocess.run(
        [sys.executable, '-c', 'import torch; print(torch.get_num_threads())'],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert _threads(csv_path, 'g:0.1') == int(default)
    assert _threads(csv_path, 'a:0.1') == 1
    code, err = run('--resume', ['a:0.1', 'b:0.1', 'g:0.1', 'e:1', 'f:0'])
    assert code == 0 and 'stopped' not in err
    assert sorted(_models(csv_path)) == ['a:0.1', 'b:0.1', 'e:1', 'f:0',
                                         'g:0.1']  # fmt: skip
