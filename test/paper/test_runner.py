import argparse
import glob
import json
import os
import os.path as osp
import signal
import subprocess
import sys
import time

import pytest

from gate_paper import store
from gate_paper.runner import (
    add_runner_args,
    check_out_dir,
    load_runs,
    provenance_of_divergence,
    run_all,
)
from gate_paper.training import Diverged

HERE = osp.dirname(osp.abspath(__file__))
ROOT = osp.dirname(osp.dirname(HERE))


def runner_args(*argv):
    parser = argparse.ArgumentParser()
    add_runner_args(parser)
    return parser.parse_args(list(argv))


def twice(config):
    return {'value': 2 * config['n']}


def configs(*ns):
    return [{'kind': 'ok', 'n': n} for n in ns]


def test_finished_runs_are_files_and_resume_skips_them(tmp_path):
    folder = str(tmp_path)
    records = run_all(configs(1, 2), twice, folder, runner_args())
    assert [r['result'] for r in records] == [{'value': 2}, {'value': 4}]
    assert sorted(os.listdir(folder)) == sorted(
        store.run_id(c) + '.json' for c in configs(1, 2)
    )

    with pytest.raises(SystemExit, match='already holds 2 of the 3 runs'):
        run_all(configs(1, 2, 3), twice, folder, runner_args())

    called = []

    def run(config):
        called.append(config['n'])
        return twice(config)

    records = run_all(configs(1, 2, 3), run, folder, runner_args('--resume'))
    assert called == [3]
    assert [r['result']['value'] for r in records] == [2, 4, 6]


def test_threads_of_runs_in_this_process(tmp_path):
    import torch

    before = torch.get_num_threads()
    seen = []

    def run(config):
        seen.append(torch.get_num_threads())
        return twice(config)

    try:
        run_all(configs(1), run, str(tmp_path), runner_args('--threads', '2'))
    finally:
        torch.set_num_threads(before)
    assert seen == [2]


def test_cut_run_file_is_run_again_with_a_warning(tmp_path):
    folder = str(tmp_path)
    run_all(configs(1), twice, folder, runner_args())
    path = store.path_of(folder, configs(1)[0])
    with open(path) as f:
        text = f.read()
    with open(path, 'w') as f:  # a write cut short
        f.write(text[: len(text) // 2])
    called = []

    def run(config):
        called.append(config['n'])
        return twice(config)

    with pytest.warns(UserWarning, match=os.path.basename(path)):
        records = run_all(configs(1), run, folder, runner_args('--resume'))
    assert called == [1]
    assert store.read(path)['result'] == {'value': 2}
    assert len(records) == 1


def test_run_file_resaved_with_a_bom_still_counts(tmp_path):
    # The old results CSV re-saved with a UTF-8 BOM was refused with
    # columns that looked identical (issue 35, item 23).
    folder = str(tmp_path)
    run_all(configs(1), twice, folder, runner_args())
    path = store.path_of(folder, configs(1)[0])
    with open(path, encoding='utf-8') as f:
        text = f.read()
    with open(path, 'w', encoding='utf-8-sig') as f:
        f.write(text)
    with open(path, 'rb') as f:
        assert f.read(3) == b'\xef\xbb\xbf'

    def never(config):
        raise AssertionError('a finished run ran again')

    records = run_all(configs(1), never, folder, runner_args('--resume'))
    assert records[0]['result'] == {'value': 2}


def test_diverged_run_is_recorded_and_the_sweep_goes_on(tmp_path):
    # --lr 1e9 made the recorder raise on NaN alpha and ended the sweep,
    # and --resume died the same way (issue 35, item 8).
    folder = str(tmp_path)

    def run(config):
        if config['n'] == 2:
            raise Diverged(7, 'the loss is NaN or infinite')
        return twice(config)

    with pytest.warns(UserWarning, match='diverged at epoch 7'):
        records = run_all(configs(1, 2, 3), run, folder, runner_args())
    assert [r['status'] for r in records] == [
        'finished',
        'diverged',
        'finished',
    ]
    assert records[1]['result'] == {}
    assert 'epoch 7' in records[1]['message']

    def never(config):
        raise AssertionError('a recorded run ran again')

    again = run_all(configs(1, 2, 3), never, folder, runner_args('--resume'))
    assert [r['status'] for r in again] == [r['status'] for r in records]


def test_a_diverged_run_records_what_it_knows_of_itself(tmp_path):
    # A diverged run's file kept the process's provenance alone (no
    # device, dtype, kernel, epochs run): a queue's diverged runs could
    # not say where they diverged.
    def run(config):
        facts = lambda epoch: {'device': 'cpu', 'epochs_run': epoch}  # noqa
        with provenance_of_divergence(facts):
            raise Diverged(7, 'the loss is NaN or infinite')

    with pytest.warns(UserWarning, match='diverged at epoch 7'):
        (record,) = run_all(configs(2), run, str(tmp_path), runner_args())
    assert record['status'] == 'diverged' and record['result'] == {}
    assert record['provenance']['device'] == 'cpu'
    assert record['provenance']['epochs_run'] == 7
    assert record['provenance']['recorded'] is True


def test_a_bad_out_dir_is_a_usage_error(tmp_path, capsys):
    # A file, or a folder under a file, as --out-dir raised a raw
    # FileExistsError / OSError (issue 35, item 15).
    parser = argparse.ArgumentParser(prog='prog')
    a_file = tmp_path / 'results.json'
    a_file.write_text('{}')
    for path, message in (
        (str(a_file), 'is a file, not a folder'),
        (str(a_file / 'runs'), 'cannot write into'),
    ):
        with pytest.raises(SystemExit) as e:
            check_out_dir(parser, path, '--out-dir')
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert 'usage: prog' in err
        assert 'argument --out-dir: ' in err
        assert repr(path) in err and message in err


# The runner across processes: the toy study (toy_study.py) -------------


def start(tmp_path, *argv, name='runs', omp_threads='1'):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE]))
    env['OMP_NUM_THREADS'] = omp_threads
    marks = tmp_path / 'marks'
    marks.mkdir(exist_ok=True)
    return subprocess.Popen(
        [sys.executable, '-m', 'toy_study', *argv]
        + ['--out-dir', str(tmp_path / name), '--marks', str(marks)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # As from a terminal: a pytest started in the background (`pytest &`,
        # nohup) ignores SIGINT, and a child would inherit that.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def wait_until(condition, what, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(
                f'ended before {what}: {proc.communicate()[1][-2000:]}'
            )
        assert time.monotonic() < deadline, f'timed out waiting for {what}'
        time.sleep(0.05)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f'/proc/{pid}/stat') as f:  # a zombie is gone too
        return f.read().split(')')[-1].split()[0] != 'Z'


def finished(folder):
    return {
        (r['config']['kind'], r['config']['n'])
        for r in store.load(str(folder))
    }


@pytest.mark.slow
def test_workers_that_finished_exit_cleanly(tmp_path):
    # Every sweep with --jobs ended in 'resource_tracker: There appear to
    # be 2 leaked semaphore objects': the pool terminated its idle workers
    # (SIGTERM skips their exit handlers) instead of letting them exit.
    proc = start(tmp_path, 'lock:1', 'lock:2', 'lock:3', '--jobs', '2')
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert 'leaked' not in err, err
    assert finished(tmp_path / 'runs') == {
        ('lock', 1),
        ('lock', 2),
        ('lock', 3),
    }


@pytest.mark.slow
def test_killed_worker_ends_the_invocation(tmp_path):
    # A worker killed by SIGKILL (the OOM killer) hung the invocation
    # forever (issue 35, item 1).
    proc = start(tmp_path, 'ok:1', 'kill:2', 'wait:3', '--jobs', '2')
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert 'a worker process died' in err and 'SIGKILL' in err
    assert finished(tmp_path / 'runs') == {('ok', 1)}
    pid_file = tmp_path / 'marks' / 'pid-3'
    if pid_file.exists():  # the worker of run 3 was ended with the pool
        assert not alive(int(pid_file.read_text()))


@pytest.mark.slow
@pytest.mark.parametrize(
    'signum, code', [(signal.SIGTERM, 143), (signal.SIGINT, 130)]
)
def test_interrupt_stops_every_worker_and_keeps_finished_runs(
    tmp_path, signum, code
):
    runs = ['ok:1', 'wait:2', 'wait:3']
    proc = start(tmp_path, *runs, '--jobs', '2')
    marks = tmp_path / 'marks'
    try:
        wait_until(
            lambda: (marks / 'pid-2').exists() and (marks / 'pid-3').exists(),
            'both workers waiting',
            proc,
        )
        assert finished(tmp_path / 'runs') == {('ok', 1)}
        pids = [int((marks / f'pid-{n}').read_text()) for n in (2, 3)]
        if signum == signal.SIGINT:  # Ctrl-C reaches the process group
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)  # it ends in about a second
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert 'interrupted: 1 of the 3 runs are finished' in err
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids)
    first = store.load(str(tmp_path / 'runs'))
    assert len(first) == 1

    (marks / 'go').touch()  # the waiting runs can finish now
    proc = start(tmp_path, *runs, '--jobs', '2', '--resume')
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert finished(tmp_path / 'runs') == {('ok', 1), ('wait', 2), ('wait', 3)}
    again = [
        r
        for r in store.load(str(tmp_path / 'runs'))
        if r['config']['kind'] == 'ok'
    ]
    assert again == first  # kept, not run again


@pytest.mark.slow
def test_simultaneous_invocations_keep_each_others_runs(tmp_path):
    # The old pid lock file let two or three of three simultaneous starts
    # hold the lock (issue 35, item 7); now there is no lock to race for.
    # Each invocation's first run waits until all three run at once.
    procs = [
        start(
            tmp_path,
            f'barrier:{i}',
            f'ok:{10 + i}',
            'ok:99',
            '--resume',
            '--parties',
            '3',
        )
        for i in range(3)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    expected = {('barrier', i) for i in range(3)}
    expected |= {('ok', 10 + i) for i in range(3)} | {('ok', 99)}
    assert finished(tmp_path / 'runs') == expected
    # ok:99, run by all three, is one whole file:
    files = glob.glob(str(tmp_path / 'runs' / 'ok_99_*.json'))
    assert len(files) == 1
    with open(files[0]) as f:
        assert json.load(f)['result']['value'] == 198
    assert not glob.glob(str(tmp_path / 'runs' / '.*'))  # no temporaries


@pytest.mark.slow
def test_jobs_start_at_most_one_worker_per_run(tmp_path):
    # --jobs 16 with one run started 16 workers (issue 35, item 10).
    proc = start(tmp_path, 'workers:1', '--jobs', '16')
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    (record,) = store.load(str(tmp_path / 'runs'))
    assert record['result']['workers'] == 1


@pytest.mark.slow
def test_every_run_of_a_worker_has_the_threads_of_threads(tmp_path):
    # A worker's first run (before any run imported torch) ran on torch's
    # default threads (OMP_NUM_THREADS, else the cores), not --threads.
    proc = start(tmp_path, 'threads:1', 'threads:2', 'threads:3', '--jobs',
                 '2', '--threads', '1', omp_threads='3')  # fmt: skip
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    records = store.load(str(tmp_path / 'runs'))
    assert len(records) == 3
    for record in records:
        assert record['result']['threads'] == 1
        assert record['provenance']['threads'] == 1


def test_run_all_from_a_thread(tmp_path):
    # Only the main thread may set a signal handler; a run from another
    # thread (a notebook's worker, a test harness) runs all the same.
    import threading

    records = []
    thread = threading.Thread(
        target=lambda: records.extend(
            run_all(configs(1, 2), twice, str(tmp_path), runner_args())
        )
    )
    thread.start()
    thread.join()
    assert [r['result']['value'] for r in records] == [2, 4]


# Issue 50: defects 1, 2 and 11, and the signals on a loaded machine -------


@pytest.fixture
def hog():
    # Two busy processes (this machine has 2 cores): the runner's signals
    # must work on a loaded machine too.
    procs = [
        subprocess.Popen([sys.executable, '-c', 'while True: pass'])
        for _ in range(2)
    ]
    yield
    for proc in procs:
        proc.kill()
        proc.wait()


def test_a_tuple_in_a_configuration_counts_as_done(tmp_path):
    # Defect 11: JSON gives a list back, so the run never counted as done.
    config = {'kind': 'ok', 'n': 1, 'depths': (1, 2)}
    run_all([config], twice, str(tmp_path), runner_args())
    called = []

    def run(c):
        called.append(c)
        return twice(c)

    records = run_all([config], run, str(tmp_path), runner_args('--resume'))
    assert called == [] and len(records) == 1


def test_a_run_file_lacking_a_result_runs_again(tmp_path):
    # Defect 6: --resume kept another version's file without the result.
    folder = str(tmp_path)
    store.save(folder, configs(1)[0], {'other': 1})
    with pytest.warns(UserWarning, match='without the results value'):
        records = run_all(
            configs(1),
            twice,
            folder,
            runner_args('--resume'),
            fields=['value'],
        )
    assert [r['result'] for r in records] == [{'value': 2}]


def test_run_files_record_their_provenance(tmp_path):
    (record,) = run_all(configs(1), twice, str(tmp_path), runner_args())
    (saved,) = store.load(str(tmp_path))
    assert saved == record
    p = saved['provenance']
    assert p['recorded'] is True and p['wall_s'] >= 0
    assert len(p['commit']) == 40 and isinstance(p['clean'], bool)
    import torch

    assert p['torch'] == torch.__version__.split('+')[0] or p['torch']
    assert p['threads'] == torch.get_num_threads()


@pytest.mark.slow
@pytest.mark.parametrize('load', ['idle', 'loaded'])
def test_sigterm_is_not_swallowed_by_except_exception(tmp_path, request, load):
    # Defect 1: SIGTERM raised an Exception, which a run's `except
    # Exception` (Inductor compiling the CPU loops) swallowed: the sweep
    # ran to its end and exited 0.
    if load == 'loaded':
        request.getfixturevalue('hog')
    proc = start(tmp_path, 'ok:1', 'swallow:2', 'ok:3')
    marks = tmp_path / 'marks'
    try:
        wait_until(lambda: (marks / 'pid-2').exists(), 'run 2', proc)
        time.sleep(0.5)  # in the loop that catches Exception
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert 'interrupted: 1 of the 3 runs are finished' in err
    assert finished(tmp_path / 'runs') == {('ok', 1)}


@pytest.mark.slow
@pytest.mark.parametrize('load', ['idle', 'loaded'])
def test_workers_end_with_a_killed_parent(tmp_path, request, load):
    # Defect 2: `kill -9` of the invocation left every worker orphaned,
    # blocked forever.
    if load == 'loaded':
        request.getfixturevalue('hog')
    proc = start(tmp_path, 'ok:1', 'wait:2', 'wait:3', '--jobs', '2')
    marks = tmp_path / 'marks'
    try:
        wait_until(
            lambda: (marks / 'pid-2').exists() and (marks / 'pid-3').exists(),
            'both workers waiting',
            proc,
        )
        pids = [int((marks / f'pid-{n}').read_text()) for n in (2, 3)]
        proc.kill()
        proc.wait()
    finally:
        proc.kill()
    deadline = time.monotonic() + 20
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids)
    assert finished(tmp_path / 'runs') == {('ok', 1)}  # kept


@pytest.mark.slow
@pytest.mark.parametrize(
    'signum, code', [(signal.SIGTERM, 143), (signal.SIGINT, 130)]
)
def test_interrupt_on_a_loaded_machine(tmp_path, hog, signum, code):
    # Once a process outlived Ctrl-C by 20 s on a loaded machine.
    proc = start(tmp_path, 'ok:1', 'wait:2', 'wait:3', '--jobs', '2')
    marks = tmp_path / 'marks'
    try:
        wait_until(
            lambda: (marks / 'pid-2').exists() and (marks / 'pid-3').exists(),
            'both workers waiting',
            proc,
        )
        pids = [int((marks / f'pid-{n}').read_text()) for n in (2, 3)]
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    deadline = time.monotonic() + 20
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids)
    assert finished(tmp_path / 'runs') == {('ok', 1)}


def test_each_run_records_its_own_cuda_peak(tmp_path, monkeypatch):
    # A worker runs run after run, and max_memory_mib was CUDA's peak since
    # the process began: a small run after a large one recorded the large
    # one's peak. A fake CUDA allocator (no GPU here): run 1 peaks at 300
    # MiB above what stays allocated, run 2 at 10 MiB.
    import torch

    from gate_paper import provenance

    mib = 2**20
    state = {'allocated': 50 * mib, 'peak': 50 * mib}

    def reset(device=None):
        state['peak'] = state['allocated']

    monkeypatch.setattr(torch.cuda, 'is_initialized', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 1)
    monkeypatch.setattr(torch.cuda, 'reset_peak_memory_stats', reset)
    monkeypatch.setattr(torch.cuda, 'max_memory_allocated',
                        lambda device=None: state['peak'])  # fmt: skip
    monkeypatch.setattr(torch.cuda, 'get_device_name', lambda d=None: 'GPU')

    def run(config):
        size = config['n'] * mib
        state['peak'] = max(state['peak'], state['allocated'] + size)
        return {
            'value': config['n'],
            'provenance': provenance.of_run(
                'cuda', torch.float32, False, 1, None
            ),
        }

    records = run_all(configs(300, 10), run, str(tmp_path), runner_args())
    peaks = [r['provenance']['max_memory_mib'] for r in records]
    assert peaks == [350.0, 60.0]


def test_tables_read_the_run_files_once(tmp_path):
    # load_runs scanned the folder twice (once for the runs of other
    # options, once through store.load): every file parsed twice and an
    # unreadable one named twice.
    import warnings

    config = {'model': 'GATE', 'seed': 0}
    store.save(str(tmp_path), config, {'acc': 1.0})
    store.save(str(tmp_path), {'model': 'GAT', 'seed': 0}, {'acc': 0.5})
    (tmp_path / 'cut_0123456789ab.json').write_text('{"config": ')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        found = load_runs(str(tmp_path), [config])
    assert [r['config'] for r in found] == [config]
    messages = [str(w.message) for w in caught]
    assert sum('cut_0123456789ab.json' in m for m in messages) == 1
    assert sum('1 run files that these options do not make' in m
               for m in messages) == 1  # fmt: skip
