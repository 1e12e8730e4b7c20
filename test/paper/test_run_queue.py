import json
import os
import os.path as osp
import signal
import subprocess
import sys
import tarfile
import time

import pytest

from gate_paper import (
    provenance,
    queue_outputs,
    queue_plan,
    queue_results,
    real_graphs,
    run_queue,
    store,
)
from gate_paper.real_graphs_tables import strong_sep

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def test_the_queue_runs_the_priorities_of_issue_49_in_order(tmp_path):
    order = queue_plan.plan()
    tiers = [t for t, _, _ in order]
    assert tiers == sorted(tiers)
    assert [tiers.count(t) for t in (1, 2, 3, 4)] == [40, 60, 200, 300]
    key = lambda c: (c['dataset'], c['recipe'], c['num_layers'], c['model'])  # noqa: E731
    first = [(key(c), c['split']) for _, _, c in order[:4]]
    assert first == [
        (('Tolokers', 'paper', 5, 'GATE'), 0),
        (('Tolokers', 'paper', 5, 'GAT'), 0),
        (('Tolokers', 'paper', 5, 'GATE'), 1),
        (('Tolokers', 'paper', 5, 'GAT'), 1),
    ]
    tier1 = [c for t, _, c in order if t == 1]
    assert [c['num_layers'] for c in tier1] == [5] * 20 + [10] * 20
    assert {c['lr'] for c in tier1 if c['num_layers'] == 10} == {0.0005}
    tier3 = [c for t, _, c in order if t == 3]
    assert {c['model'] for c in tier3} == {'GAT-sep', 'GATE-sep'}
    assert {(c['hidden'], c['heads'], c['max_epochs']) for c in tier3} == {
        (512, 8, 1000)
    }
    assert [c['dataset'] for c in tier3] == ['Minesweeper'] * 100 + [
        'Tolokers'
    ] * 100
    # The configurations of `real_graphs` for the study's options, so that
    # its --tables-only reads the queue's runs.
    for study, (argv, _) in queue_plan.STUDIES.items():
        args = real_graphs.parse_args(
            argv + ['--tables-only', '--out-dir', str(tmp_path / 'x')]
        )
        ids = {store.run_id(c) for c in real_graphs.configs(args)}
        queued = {store.run_id(c) for _, s, c in order if s == study}
        assert queued == ids


def workers_of(pid):
    try:
        with open(f'/proc/{pid}/task/{pid}/children') as f:
            children = f.read().split()
    except FileNotFoundError:
        return []
    found = []
    for child in children:
        try:
            with open(f'/proc/{child}/cmdline', 'rb') as f:
                if b'spawn_main' in f.read():
                    found.append(int(child))
        except FileNotFoundError:
            pass
    return found


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f'/proc/{pid}/stat') as f:
        return f.read().split(')')[-1].split()[0] != 'Z'


def start(tmp_path, out, budget, *argv):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    return subprocess.Popen(
        [sys.executable, '-m', 'gate_paper.run_queue', 'run', '--dry']
        + ['--out', str(out), '--store', str(tmp_path / 'store')]
        + ['--procs', '2', '--budget', str(budget), *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def read_back(out):
    r"""The run files of ``out/runs.tar``, each validated."""
    records = {}
    with tarfile.open(out / 'runs.tar') as tar:
        for member in tar.getmembers():
            study, name = member.name.split('/')
            path = out / 'check' / name
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(tar.extractfile(member).read())
            record = store.read(str(path), real_graphs.RESULTS)
            assert name == store.run_id(record['config']) + '.json'
            records[name[: -len('.json')]] = record
    return records


def running_worker(work):
    r"""The process id of a worker in the middle of a run: the pid file
    that the run writes in the work folder while it runs, if any."""
    for path in work.rglob('.*.pid'):
        try:
            return int(path.read_text())
        except (OSError, ValueError):  # gone, or being written
            pass
    return None


@pytest.mark.slow
def test_dry_call_with_a_killed_worker_and_the_time_running_out(tmp_path):
    out = tmp_path / 'out'
    # Two runs finish in about 12 s on 2 idle cores (100-epoch runs take 1-2
    # s once a worker's first GATE run has compiled its loops): the budget
    # leaves room for a loaded machine and a cold Inductor cache (the first
    # GATE run took over 28 s with the suite beside it) and ends with runs
    # still going.
    work = tmp_path / 'work'
    proc = start(tmp_path, out, 45, '--dry-epochs', '100', '--work', work)
    killed = None
    workers = set()
    try:
        deadline = time.monotonic() + 120
        while killed is None:
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, 'no run finished'
            workers |= set(workers_of(proc.pid))
            log = out / 'log.txt'
            if log.exists() and log.read_text().count('] done tier') >= 2:
                # A worker mid-run: the pid its run wrote. (A worker killed
                # between two runs, before the next one wrote its pid, left
                # no run to blame, and the test failed now and then.)
                killed = running_worker(work)
                if killed is not None:
                    os.kill(killed, signal.SIGKILL)
            time.sleep(0.1)
        while proc.poll() is None:
            workers |= set(workers_of(proc.pid))
            time.sleep(0.2)
        text, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, text[-3000:]
    print(text[-6000:])
    assert sorted(os.listdir(out)) == sorted(queue_outputs.FILES)  # <= 8
    assert 'a worker died (SIGKILL?) during' in text
    assert 'time is up' in text
    summary = json.loads((out / 'summary.json').read_text())
    assert any('worker died' in e for e in summary['events'])
    assert summary['procs'] == 2
    records = read_back(out)  # whole, valid run files only
    assert set(records) == set(summary['finished'])
    assert len(records) == summary['finished_this_call'] >= 2
    for r in records.values():
        p = r['provenance']
        assert p['recorded'] and p['device'] == 'cpu' and p['threads'] == 1
    per_model = summary['seconds_per_epoch']
    assert per_model and all(v['procs'] == 2 for v in per_model.values())
    # every process of the call is gone
    deadline = time.monotonic() + 20
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in workers)

    # The next call goes on from the runs committed to the store.
    with pytest.raises(ValueError, match='a --dry run'):
        queue_results.unpack(str(out / 'runs.tar'), str(tmp_path / 'store'))
    assert not (tmp_path / 'store').exists()  # nothing written
    counts = queue_results.unpack(
        str(out / 'runs.tar'), str(tmp_path / 'store'), dry_epochs=100
    )
    assert sum(counts.values()) == len(records)
    order = queue_plan.plan(100)
    ids = [store.run_id(c) for _, _, c in order]
    folders = lambda s: [str(tmp_path / 'store' / s)]  # noqa: E731
    assert queue_plan.done_in(folders, order) & set(ids) == set(records)
    # --dry-epochs 2 makes other configurations: none finished
    other = queue_plan.plan(2)
    other_ids = {store.run_id(c) for _, _, c in other}
    assert not queue_plan.done_in(folders, other) & other_ids
    # The next call through the shell entry (the command of a GPU call),
    # 40 s: runs finish on a loaded machine too (CI with -n 2; 20 s left a
    # machine busy with other work with none, its workers still compiling).
    again = tmp_path / 'again'
    env = dict(os.environ, OUT=str(again), PYTHON=sys.executable,
               COMMIT='0' * 40, OMP_NUM_THREADS='1')  # fmt: skip
    proc = subprocess.run(
        ['bash', osp.join('gate_paper', 'gpu_queue.sh'), '--dry']
        + ['--store', str(tmp_path / 'store'), '--budget', '40']
        + ['--procs', '2', '--dry-epochs', '100'],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=200,
    )  # fmt: skip
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    assert f', {len(records)} finished in' in text
    # It starts where the committed runs end, in the queue's order (its
    # first runs: later ones skip what the time left cannot hold):
    lines = text.splitlines()
    started = [line.split()[-1] for line in lines if '] start tier' in line]
    left = [i for i in ids if i not in records]
    assert len(started) >= 2 and started[:2] == left[:2]
    assert sorted(os.listdir(again)) == sorted(queue_outputs.FILES)
    more = read_back(again)
    assert more and not set(more) & set(records)
    for r in more.values():
        assert len(r['provenance']['commit']) == 40


class FakeOutputs:
    def __init__(self):
        self.added = []

    def log(self, text):
        pass

    def add(self, study, record):
        self.added.append(store.run_id(record['config']))


def fake_loop(tmp_path, monkeypatch, order, outcome, exitcode=None):
    r"""``run_queue._loop`` over ``order`` with pools whose runs end as
    ``outcome(pools, pool, config)`` says: a record (finished), an
    exception (raised by the future), None (never ends); the outcome may
    also raise at ``submit``. Each run has a worker of its own, which
    writes its process id as a worker does and, when its pool breaks, ends
    with ``exitcode(config)`` (default: SIGKILL, as if it died). Returns the
    call, the outputs and the pools (each with the configurations submitted
    to it)."""
    import argparse
    import itertools
    import signal
    from concurrent.futures import Future

    pools, pids = [], itertools.count(1000)

    class Pool:
        def __init__(self):
            self.configs = []
            self._processes = {}
            pools.append(self)

        def submit(self, fn, task, config, folder):
            assert fn is run_queue._attempt
            result = outcome(pools, self, config)  # may raise
            self.configs.append(config)
            pid = next(pids)
            with open(run_queue._pid_file(folder, config), 'w') as f:
                f.write(str(pid))
            code = exitcode(config) if exitcode else -signal.SIGKILL
            self._processes[pid] = argparse.Namespace(
                pid=pid, exitcode=code, kill=lambda: None
            )
            future = Future()
            if isinstance(result, BaseException):
                future.set_exception(result)
            elif result is not None:
                future.set_result(result)
            return future

        def shutdown(self, wait, cancel_futures):
            self._processes = None  # as ProcessPoolExecutor's does

    monkeypatch.setattr(run_queue, '_new_pool', lambda args: Pool())
    for study in {s for _, s, _ in order}:
        (tmp_path / study).mkdir()
    args = argparse.Namespace(procs=2, budget=60, dry=True)
    call = run_queue._Call(args, order, set())
    outputs = FakeOutputs()
    run_queue._loop(call, outputs, None, str(tmp_path))
    return call, outputs, pools


def finished(config):
    facts = {'wall_s': 0.1, 'epochs_run': 1, 'recorded': True}
    return {'config': config, 'status': 'finished', 'provenance': facts}


def test_a_pool_broken_at_a_submit_is_renewed(tmp_path, monkeypatch):
    # A worker that dies while the loop hands out runs breaks the pool at
    # `submit` (not at a future's result): that run goes back to the
    # queue unstarted, the one still going goes again, and a new pool runs
    # them all.
    from concurrent.futures.process import BrokenProcessPool

    def outcome(pools, pool, config):  # The first breaks at its second.
        if len(pools) == 1 and pool.configs:
            raise BrokenProcessPool('a child process terminated')
        return finished(config) if len(pools) > 1 else None

    order = run_queue.plan(1)[:3]
    call, outputs, pools = fake_loop(tmp_path, monkeypatch, order, outcome)
    ids = [store.run_id(c) for _, _, c in order]
    assert call.done == set(ids) and sorted(outputs.added) == sorted(ids)
    assert len(pools) == 2 and len(pools[1].configs) == 3
    assert call.events == [
        f'a worker died (SIGKILL?) during {ids[0]}: it goes again'
    ]


def test_a_broken_pool_blames_the_run_its_worker_died_on(
    tmp_path, monkeypatch
):
    # Two runs in flight; the first one's worker dies (SIGKILL) twice, and
    # each time the pool ends the second one's worker (SIGTERM): the second
    # goes again without an attempt counted and finishes; the first is not
    # tried a third time.
    import signal
    from concurrent.futures.process import BrokenProcessPool

    order = run_queue.plan(1)[:2]
    ids = [store.run_id(c) for _, _, c in order]

    def outcome(pools, pool, config):
        if len(pools) <= 2:
            return BrokenProcessPool('a child process terminated')
        return finished(config)

    def exitcode(config):
        killed = store.run_id(config) == ids[0]
        return -signal.SIGKILL if killed else -signal.SIGTERM

    call, outputs, pools = fake_loop(tmp_path, monkeypatch, order, outcome,
                                     exitcode)  # fmt: skip
    assert outputs.added == [ids[1]] and call.done == {ids[1]}
    assert [len(p.configs) for p in pools] == [2, 2, 1]
    assert call.events == [
        f'a worker died (SIGKILL?) during {ids[0]}: it goes again',
        f'a worker died twice on {ids[0]}: not tried again in this call',
    ]
    # The dead worker's file was read and removed (a finished run's worker
    # removes its own; these fake ones do not):
    assert not (tmp_path / order[0][1] / f'.{ids[0]}.pid').exists()


def test_a_run_that_raises_is_reported_and_the_call_goes_on(
    tmp_path, monkeypatch
):
    # A run that fails (CUDA out of memory, say) is an event of the call,
    # not tried again in it; the other runs go on, in the same pool.
    order = run_queue.plan(1)[:4]
    ids = [store.run_id(c) for _, _, c in order]

    def outcome(pools, pool, config):
        if store.run_id(config) == ids[1]:
            return RuntimeError('CUDA out of memory')
        return finished(config)

    call, outputs, pools = fake_loop(tmp_path, monkeypatch, order, outcome)
    assert sorted(outputs.added) == sorted(ids[:1] + ids[2:])
    assert call.done == set(outputs.added) and not call.todo
    assert len(pools) == 1 and len(pools[0].configs) == 4
    assert call.events == [
        f'{ids[1]} failed (RuntimeError: CUDA out of memory): not tried '
        'again in this call'
    ]


def test_a_run_written_before_its_pool_broke_is_in_the_call(
    tmp_path, monkeypatch
):
    # The worker wrote the run's file, then the pool broke before its
    # result reached the queue: the run is finished, in this call's
    # outputs, not run again.
    from concurrent.futures.process import BrokenProcessPool

    order = run_queue.plan(1)[:2]
    ids = [store.run_id(c) for _, _, c in order]

    def outcome(pools, pool, config):
        if len(pools) == 1 and store.run_id(config) == ids[0]:
            record = finished(config)
            folder = tmp_path / order[0][1]
            store.save(str(folder), config, {'metric': 'roc_auc',
                       'best_epoch': 1, 'val_metric': 0.5,
                       'test_metric': 0.5, 'test_acc': 0.5,
                       'test_bal_acc': 0.5, 'test_roc_auc': 0.5,
                       'epochs_run': 1}, 'finished', None,
                       record['provenance'])  # fmt: skip
            return BrokenProcessPool('a child process terminated')
        return finished(config)

    call, outputs, pools = fake_loop(tmp_path, monkeypatch, order, outcome)
    assert sorted(outputs.added) == sorted(ids)
    assert [store.run_id(c) for p in pools for c in p.configs].count(
        ids[0]
    ) == 1
    assert not call.events  # nobody died during a run


def test_a_worker_s_first_run_does_not_set_the_expected_time():
    # The first GATE run of a worker took 20 s (compiling), the others
    # 0.2 s: the longest, 20 s, kept a top-priority run from starting with
    # 19 s left.
    import argparse

    order = queue_plan.plan()[:1]
    call = run_queue._Call(argparse.Namespace(budget=60), order, set())
    config = order[0][2]
    for wall in (20.3, 0.2, 0.2, 0.3):
        call.records.append({'config': config, 'provenance': {'wall_s': wall}})
    assert call.expected(config) == pytest.approx(0.25)


def test_unpack_refuses_what_is_not_a_run_of_the_queue(tmp_path):
    path = tmp_path / 'runs.tar'
    evil = tmp_path / 'x.json'
    evil.write_text('{}')
    with tarfile.open(path, 'w') as tar:
        tar.add(evil, '../outside.json')
    with pytest.raises(ValueError, match='is not <study>/<run>.json'):
        queue_results.unpack(str(path), str(tmp_path / 'store'))
    assert not (tmp_path / 'outside.json').exists()
    config = queue_plan.plan()[0][2]
    folder = tmp_path / 'made'
    folder.mkdir()
    good = store.save(str(folder), config, {'metric': 'roc_auc'})
    with tarfile.open(path, 'w') as tar:
        tar.add(good, 'real_graphs_tolokers/' + osp.basename(good))
    with pytest.raises(ValueError, match='without the results best_epoch'):
        queue_results.unpack(str(path), str(tmp_path / 'store'))
    # A whole run without its provenance (commit, versions, device), or
    # run where no commit was known (no .git, no --commit):
    result = dict.fromkeys(real_graphs.RESULTS, 0.5)
    no_commit = {'recorded': True, 'commit': None, 'device': 'cuda:0'}
    for facts in (None, {'recorded': False}, no_commit):
        whole = store.save(str(folder), config, result, 'finished', None,
                           facts)  # fmt: skip
        with tarfile.open(path, 'w') as tar:
            tar.add(whole, 'real_graphs_tolokers/' + osp.basename(whole))
        with pytest.raises(ValueError, match='records no provenance'):
            queue_results.unpack(str(path), str(tmp_path / 'store'))
    assert not (tmp_path / 'store').exists()


def queue_tar(tmp_path, count=3, order=None, result=None):
    r"""A ``runs.tar`` of ``count`` whole runs of the queue (of ``order``,
    default :func:`plan`'s; each with ``result``), as a call writes it;
    returns its path and members."""
    folder = tmp_path / 'made'
    folder.mkdir(exist_ok=True)
    facts = {'recorded': True, 'commit': 'a' * 40, 'device': 'cuda:0'}
    result = result or dict.fromkeys(real_graphs.RESULTS, 0.5)
    path = tmp_path / 'runs.tar'
    with tarfile.open(path, 'w') as tar:
        for _, study, config in (order or queue_plan.plan())[:count]:
            made = store.save(str(folder), config, result, 'finished',
                              None, facts)  # fmt: skip
            tar.add(made, f'{study}/{osp.basename(made)}')
    with tarfile.open(path) as tar:
        return path, tar.getmembers()


def test_unpack_refuses_a_cut_tar_file(tmp_path):
    path, members = queue_tar(tmp_path)
    whole = path.read_bytes()
    cut = tmp_path / 'cut.tar'
    # Cut where a member ends (a transfer that stopped there): tarfile reads
    # the members before the cut as a whole archive.
    for end in (members[2].offset, members[1].offset_data + 10):
        cut.write_bytes(whole[:end])
        with pytest.raises(ValueError, match='not a whole tar file'):
            queue_results.unpack(str(cut), str(tmp_path / 'store'))
        assert not (tmp_path / 'store').exists()
    cut.write_bytes(b'')
    with pytest.raises(ValueError, match=r'cut.tar: not a whole tar file \('):
        queue_results.unpack(str(cut), str(tmp_path / 'store'))
    counts = queue_results.unpack(str(path), str(tmp_path / 'store'))
    assert sum(counts.values()) == len(members) == 3


def test_unpack_names_the_member_a_run_file_is_refused_for(tmp_path):
    path, members = queue_tar(tmp_path, 1)
    with tarfile.open(path) as tar:
        record = json.load(tar.extractfile(members[0]))
    del record['result']['best_epoch']  # another version's file
    bad = tmp_path / 'bad.json'
    bad.write_text(json.dumps(record))
    with tarfile.open(path, 'w') as tar:
        tar.add(bad, members[0].name)
    with pytest.raises(ValueError) as e:
        queue_results.unpack(str(path), str(tmp_path / 'store'))
    assert str(e.value) == (
        f'{path}: {members[0].name} is a finished run without the results '
        "best_epoch (another version's file?)"
    )


def test_unpack_keeps_a_run_the_store_holds(tmp_path):
    # The store holds the first run (another call's, another commit) and a
    # cut file of the second; the tar file holds both, from this call.
    path, members = queue_tar(tmp_path, 2)
    order = queue_plan.plan()
    first = tmp_path / 'store' / order[0][1]
    first.mkdir(parents=True)
    facts = {'recorded': True, 'commit': 'b' * 40, 'device': 'cuda:1'}
    result = dict.fromkeys(real_graphs.RESULTS, 0.25)
    held = store.save(str(first), order[0][2], result, 'finished', None,
                      facts)  # fmt: skip
    before = open(held).read()
    cut = store.path_of(str(tmp_path / 'store' / order[1][1]), order[1][2])
    with open(cut, 'w') as f:
        f.write(before[:50])
    with pytest.warns(UserWarning, match='1 runs of .* kept, not replaced'):
        counts = queue_results.unpack(str(path), str(tmp_path / 'store'))
    assert counts == {order[1][1]: 1}
    assert open(held).read() == before
    with tarfile.open(path) as tar:
        assert open(cut, 'rb').read() == tar.extractfile(members[1]).read()


def test_a_call_without_a_commit_to_record_is_refused(
    tmp_path, monkeypatch, capsys
):
    # On a machine without .git (the lent GPU's) and without --commit, the
    # call ran and wrote runs that unpack could not tell the commit of.
    monkeypatch.setattr(provenance, '_git', lambda *argv: None)
    provenance.environment.cache_clear()
    monkeypatch.delenv('GATE_PAPER_COMMIT', raising=False)
    try:
        with pytest.raises(SystemExit) as e:
            run_queue.parse_args(['run', '--out', str(tmp_path)])
        assert e.value.code == 2
        assert 'pass --commit' in capsys.readouterr().err
        args = ['run', '--out', str(tmp_path), '--commit', 'a' * 40]
        assert run_queue.parse_args(args).commit == 'a' * 40
        assert run_queue.parse_args([*args[:3], '--dry']).dry
    finally:
        provenance.environment.cache_clear()


@pytest.mark.parametrize('budget', ['abc', '5', 'nan', '541'])
def test_a_budget_that_is_no_number_of_seconds_is_a_usage_error(
    tmp_path, capsys, budget
):
    argv = ['run', '--out', str(tmp_path), '--dry', '--budget', budget]
    with pytest.raises(SystemExit) as e:
        run_queue.parse_args(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.endswith(
        f"argument --budget: expected a number in [10, 540], got '{budget}'"
    )
    assert run_queue.parse_args(argv[:-1] + ['540']).budget == 540


@pytest.mark.parametrize(
    'device, expected',
    [
        ('gpu', "'auto', 'cpu', 'cuda' or 'cuda:N' (N >= 0)"),
        ('cuda:x', "'auto', 'cpu', 'cuda' or 'cuda:N' (N >= 0)"),
        ('cuda', "'cpu' (no CUDA device is available here)"),
        ('cuda:1', "'cpu' (no CUDA device is available here)"),
    ],
)
def test_a_device_that_is_not_here_is_a_usage_error(
    tmp_path, capsys, monkeypatch, device, expected
):
    # Any --device was taken: every run of the call then failed in its
    # worker ('gpu', a CUDA device the machine lacks), and the call ended
    # with code 0 and no run.
    import torch

    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    argv = ['run', '--out', str(tmp_path), '--dry', '--device', device]
    with pytest.raises(SystemExit) as e:
        run_queue.parse_args(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.endswith(f'argument --device: expected {expected}, got '
                        f'{device!r}')  # fmt: skip
    assert run_queue.parse_args(argv[:-1] + ['cpu']).device == 'cpu'


def test_an_out_that_is_a_file_is_a_usage_error(tmp_path, capsys):
    # It ended in a FileExistsError traceback, after the plan was made and
    # a work folder created.
    out = tmp_path / 'out'
    out.write_text('')
    with pytest.raises(SystemExit) as e:
        run_queue.parse_args(['run', '--dry', '--out', str(out)])
    assert e.value.code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.endswith(f'argument --out: {str(out)!r} is a file, not a '
                        'folder')  # fmt: skip


@pytest.mark.parametrize('commit', ['01e2bdc', 'HEAD', 'a' * 39, 'g' * 40])
def test_a_commit_that_is_no_full_hash_is_a_usage_error(
    tmp_path, capsys, commit
):
    # Every run file of the call records it, and unpack takes it as is.
    argv = ['run', '--out', str(tmp_path), '--commit', commit]
    with pytest.raises(SystemExit) as e:
        run_queue.parse_args(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.endswith(
        'argument --commit: expected the full hash of the commit (40 hex '
        f'digits: git rev-parse HEAD), got {commit!r}'
    )
    full = '0123456789abcdef' * 4
    for given in (full[:40], full):  # SHA-1, SHA-256
        assert run_queue.parse_args(argv[:-1] + [given]).commit == given


def test_the_strong_table_says_no_runs_yet_and_the_published_numbers():
    table = strong_sep([])
    assert len(table) == 12
    assert (
        table[table['L'] != 'best on validation']['GAT-sep'] == 'no runs yet'
    ).all()
    best = table[table['L'] == 'best on validation'].set_index('dataset')
    assert best.loc['Minesweeper', 'Platonov et al. GAT-sep'] == '93.91 ± 0.35'
    assert best.loc['Tolokers', 'Platonov et al. GAT-sep'] == '83.78 ± 0.43'
    assert best.loc['Minesweeper', 'GATE paper GATE-sep'] == '94.18 ± 0.43'


def strong_run(model, L, split, status, result):
    r"""A run record of the strong recipe on Minesweeper."""
    config = {
        'dataset': 'Minesweeper',
        'recipe': 'strong',
        'model': model,
        'num_layers': L,
        'split': split,
        'edges': 'undirected',
    }
    return {'config': config, 'status': status, 'result': result}


def test_the_strong_table_of_runs():
    records = [
        strong_run(
            model,
            L,
            split,
            'finished',
            {'test_metric': test + split / 100, 'val_metric': val},
        )
        for model, L, test, val in [
            ('GAT-sep', 1, 0.90, 0.9),
            ('GAT-sep', 2, 0.80, 0.8),
            ('GATE-sep', 1, 0.92, 0.7),
            ('GATE-sep', 2, 0.94, 0.95),
        ]
        for split in (0, 1)
    ]
    table = strong_sep(records).set_index(['dataset', 'L'])
    row = table.loc[('Minesweeper', '1')]
    assert row['GAT-sep'].startswith('90.50 ± ') and '(n=2)' in row['GAT-sep']
    assert row['GATE-sep minus GAT-sep'].startswith('2.00 ± 0.00 (n=2)')
    best = table.loc[('Minesweeper', 'best on validation')]
    assert best['GAT-sep'].endswith('(L=1)')
    assert best['GATE-sep'].startswith('94.50') and best['GATE-sep'].endswith(
        '(L=2)'
    )
    assert table.loc[('Minesweeper', '3'), 'GAT-sep'] == 'no runs yet'
    assert table.loc[('Tolokers', '1'), 'GATE-sep'] == 'no runs yet'


def test_a_paired_difference_that_rounds_to_zero_has_no_sign():
    # Two models tied on every split but for float32 rounding of their
    # accuracies (Texas, L=20: a mean of -6e-7 points read '-0.00').
    from gate_paper.real_graphs import RESULTS
    from gate_paper.real_graphs_tables import minus_gat
    from gate_paper.tables import runs_frame

    tests = {'GAT': (0.5, 0.25, 0.625), 'GATE': (0.5, 0.25, 0.625 - 1e-8)}
    tests['GAT-sep'], tests['GATE-sep'] = tests['GAT'], tests['GATE']
    records = [
        strong_run(m, 1, i, 'finished', {'test_metric': v, 'val_metric': v})
        for m, values in tests.items()
        for i, v in enumerate(values)
    ]
    mean = sum(tests['GATE']) - sum(tests['GAT'])
    assert f'{100 * mean / 3:.2f}' == '-0.00'  # the case
    table = minus_gat(runs_frame(records, RESULTS)).set_index('model')
    assert table.loc['GATE', 'minus GAT'].startswith('0.00 ± 0.00 (n=3)')
    row = strong_sep(records).set_index(['dataset', 'L'])
    cell = row.loc[('Minesweeper', '1'), 'GATE-sep minus GAT-sep']
    assert cell.startswith('0.00 ± 0.00 (n=3)')
    # A difference that rounds to one keeps its sign.
    records[5]['result']['test_metric'] = 0.625 - 3e-4  # GATE's third
    table = minus_gat(runs_frame(records, RESULTS)).set_index('model')
    assert table.loc['GATE', 'minus GAT'].startswith('-0.01 ± ')


def test_the_depth_table_names_a_model_whose_runs_all_diverged():
    # GATE's every run diverged: the strong recipe's depth table says so
    # (the tables rebuilt by `unpack` raised on the all-NaN means).
    from gate_paper.real_graphs_tables import tables

    def result(L):
        return dict(
            metric='roc_auc',
            best_epoch=3,
            test_metric=0.9,
            val_metric=0.8 + L / 100,
            alpha_vv_mean=[0.5] * L,
        )

    records = [
        strong_run('GAT', L, split, 'finished', result(L))
        for L in (1, 2)
        for split in (0, 1)
    ] + [
        strong_run('GATE', L, split, 'diverged', {})
        for L in (1, 2)
        for split in (0, 1)
    ]
    depth = dict((name, t) for name, _, t in tables(records))['depth']
    depth = depth.set_index('model')
    assert depth.loc['GAT', 'L'] == 2  # the best mean validation metric
    assert depth.loc['GATE', 'val (mean)'] == 'diverged'
    assert depth.loc['GATE', 'L'] == '-'


def test_the_best_depth_is_not_one_where_runs_diverged():
    # Depth 2: one run at 0.99 and nine diverged; the mean over the
    # finished run chose it beside the published number, as "99.00 (n=1)".
    from gate_paper.real_graphs_tables import tables

    def run(model, L, split):
        if L == 2 and split > 0:
            return strong_run(model, L, split, 'diverged', {})
        val = 0.99 if L == 2 else 0.90
        result = dict(metric='roc_auc', best_epoch=3, test_metric=val,
                      val_metric=val, alpha_vv_mean=[0.5] * L)  # fmt: skip
        return strong_run(model, L, split, 'finished', result)

    records = [
        run(model, L, split)
        for model in ('GAT-sep', 'GATE-sep')
        for L in (1, 2)
        for split in range(10)
    ]
    table = strong_sep(records).set_index(['dataset', 'L'])
    best = table.loc[('Minesweeper', 'best on validation')]
    assert best['GATE-sep'] == '90.00 ± 0.00 (n=10) (L=1)'
    depth_2 = table.loc[('Minesweeper', '2')]
    assert depth_2['GATE-sep'] == '99.00 (n=1; 9 diverged)'
    assert depth_2['GATE-sep minus GAT-sep'].endswith('(n=1)')
    depth = dict((name, t) for name, _, t in tables(records))['depth']
    assert list(depth['L']) == [1, 1]
    assert list(depth['test']) == ['90.00 ± 0.00 (n=10)'] * 2


def test_the_plan_estimates_from_the_measured_gpu_runs(tmp_path, capsys):
    (_, study, first), (_, _, second) = queue_plan.plan()[:2]
    folder = tmp_path / study
    folder.mkdir()
    for config, wall in ((first, 120.0), (second, 60.0)):
        store.save(
            str(folder),
            config,
            {k: 0 for k in real_graphs.RESULTS},
            provenance={'recorded': True, 'device': 'cuda', 'wall_s': wall},
        )
    # GATE split 0 done: its cell's 120 s for the 9 GATE splits left at
    # depth 5, GAT's 60 s for GAT's 9: 1620 s with 1 process
    queue_plan.show_plan(str(tmp_path), procs=1)
    out = capsys.readouterr().out
    assert 'tier 1: 2 of 40 finished; 18 of the 38 left' in out
    assert 'about 27 min with 1 processes' in out


def test_unpack_rebuilds_the_docs_tables_for_the_default_store_alone(
    tmp_path, monkeypatch, capsys
):
    # Another store (or dry runs) must not overwrite the docs' tables: their
    # tables go where --tables-dir says, else nowhere.
    calls = []
    monkeypatch.setattr(run_queue, 'unpack', lambda *args: {})
    monkeypatch.setattr(
        run_queue, 'rebuild_tables', lambda *args: calls.append(args)
    )
    store = str(tmp_path / 'store')
    run_queue.main(['unpack', 'runs.tar', '--store', store])
    run_queue.main(['unpack', 'runs.tar', '--dry-epochs', '2'])
    assert calls == []
    assert 'tables: not rebuilt' in capsys.readouterr().out
    tables = str(tmp_path / 'tables')
    run_queue.main(['unpack', 'runs.tar', '--store', store, '--tables-dir',
                    tables])  # fmt: skip
    run_queue.main(['unpack', 'runs.tar'])
    assert calls == [
        (store, tables, None),
        (run_queue.STORE, run_queue.TABLES, None),
    ]


def test_unpack_of_dry_runs_tables_them_in_tables_dir(tmp_path, capsys):
    # The tables of `unpack --dry-epochs N --tables-dir DIR` looked for the
    # runs of the real configurations: "0 runs", whatever was unpacked.
    order = queue_plan.plan(2)
    strong = [item for item in order if item[1] == 'real_graphs_strong']
    result = dict.fromkeys(real_graphs.RESULTS, 0.5)
    result.update(metric='roc_auc', best_epoch=1, epochs_run=2)
    for name in ('alpha_vv_mean', 'bal_test_bal_acc', 'energy_all_input',
                 'energy_all_output', 'energy_adj_input', 'energy_adj_output',
                 'bal_test_roc_auc'):  # fmt: skip
        result[name] = [0.5, 0.5] if name == 'alpha_vv_mean' else 0.5
    path, _ = queue_tar(tmp_path, 4, order[:2] + strong[:2], result)
    store_root, tables = str(tmp_path / 'store'), tmp_path / 'tables'
    argv = ['unpack', str(path), '--store', store_root, '--dry-epochs', '2']
    assert run_queue.main(argv + ['--tables-dir', str(tables)]) == 0
    assert "unpacked: {'real_graphs_tolokers': 2, 'real_graphs_strong': 2}" \
        in capsys.readouterr().out  # fmt: skip
    text = (tables / 'strong' / 'strong.md').read_text()
    assert '\n2 runs of the strong recipe.\n' in text
    text = (tables / 'tolokers' / 'real_graphs.md').read_text()
    assert '\n2 runs.' in text


def test_run_without_the_data_is_an_error_naming_the_data_root(
    tmp_path, monkeypatch
):
    # A data root without the datasets (and no network) ended in a
    # traceback; the error of the data module names the files and the fix.
    from gate_paper import data as gp_data

    def fetch(datasets, root):
        raise FileNotFoundError(f'could not download {datasets[0]}')

    monkeypatch.setattr(gp_data, 'fetch', fetch)
    argv = ['run', '--dry', '--data-root', str(tmp_path / 'empty'),
            '--out', str(tmp_path / 'out'), '--procs', '1']  # fmt: skip
    with pytest.raises(SystemExit) as e:
        run_queue.main(argv)
    assert str(e.value) == (
        'error: --data-root: could not download Minesweeper'
    )


def test_the_shell_entry_needs_no_table_packages(tmp_path):
    # The lent GPU machine has torch, PyG and NumPy, maybe no pandas or
    # SciPy: gpu_queue.sh refused to start without them (exit 3, the GPU
    # call wasted), though only unpack's tables read them.
    blocked = tmp_path / 'blocked'
    for name in ('pandas', 'scipy', 'sklearn', 'matplotlib'):
        (blocked / name).mkdir(parents=True)
        (blocked / name / '__init__.py').write_text(
            f"raise ImportError('{name} is not installed here')\n"
        )
    out = tmp_path / 'out'
    env = dict(os.environ, OUT=str(out), PYTHON=sys.executable,
               PYTHONPATH=str(blocked), COMMIT='0' * 40,
               OMP_NUM_THREADS='1')  # fmt: skip
    proc = subprocess.run(
        ['bash', osp.join('gate_paper', 'gpu_queue.sh'), '--dry']
        + ['--store', str(tmp_path / 'store'), '--budget', '40']
        + ['--procs', '2', '--work', str(tmp_path / 'work')],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=200,
    )  # fmt: skip
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    # Runs finished and were kept (two processes: the GAT run beside GATE's
    # first, which compiles for seconds, finishes on a loaded machine too):
    assert read_back(out), text[-3000:]


def test_a_call_without_a_cuda_device_stops_before_any_run(
    tmp_path, monkeypatch
):
    # `--device auto` ran the GPU queue on the CPU where torch saw no GPU
    # (a driver older than the CUDA build, say): CPU runs, recorded as the
    # call's, for the whole budget.
    import torch

    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    argv = ['run', '--out', str(tmp_path / 'out'), '--commit', 'a' * 40,
            '--store', str(tmp_path / 'store'), '--procs', '1']  # fmt: skip
    with pytest.raises(SystemExit) as e:
        run_queue.main(argv)
    assert str(e.value) == (
        'error: no CUDA device (torch.cuda.is_available() is False with '
        f'torch {torch.__version__}): the queue runs GPU runs; --device cpu '
        'runs them on the CPU'
    )
    assert read_back(tmp_path / 'out') == {}  # No run.
