import json
import math
import os

import pytest

from gate_paper import store

CONFIG = {'dataset': 'er8', 'model': 'GATE_S', 'num_layers': 5, 'lr': 0.005}


def test_run_file_round_trip(tmp_path):
    result = {'acc': 0.5, 'nan': math.nan, 'alphas': [0.25, math.inf]}
    path = store.save(str(tmp_path), CONFIG, result)
    # the values in the order of the sorted keys:
    assert os.path.basename(path).startswith('er8_0.005_GATE_S_5_')
    with open(path) as f:
        text = f.read()
    assert 'NaN' not in text and 'Infinity' not in text  # standard JSON
    record = store.read(path)
    assert record == {
        'config': CONFIG,
        'status': 'finished',
        'result': {'acc': 0.5, 'nan': None, 'alphas': [0.25, None]},
    }
    assert os.listdir(tmp_path) == [os.path.basename(path)]  # no temporary
    assert store.load(str(tmp_path), [CONFIG, {**CONFIG, 'lr': 0.01}]) == [
        record
    ]


def test_run_id_names_the_whole_configuration():
    assert store.run_id(CONFIG) == store.run_id(dict(CONFIG))
    assert store.run_id(CONFIG) != store.run_id({**CONFIG, 'lr': 0.0050001})
    long = {'name': 'x' * 300, 'n': 1}
    assert len(store.run_id(long)) <= 80 + 13
    assert store.run_id({'a': 'b/c d'}).startswith('b-c-d_')


def test_a_second_save_of_a_run_replaces_it_whole(tmp_path):
    store.save(str(tmp_path), CONFIG, {'acc': 0.1})
    path = store.save(str(tmp_path), CONFIG, {'acc': 0.2})
    assert store.read(path)['result'] == {'acc': 0.2}
    assert len(os.listdir(tmp_path)) == 1


@pytest.mark.parametrize(
    'text, message',
    [
        ('{"config": {"a": 1}, "status": "fin', 'not a whole run file'),
        ('\xff\xfe', 'not a whole run file'),
        ('[1, 2]', 'not a run file'),
        ('{"config": {}, "status": "done", "result": {}}', 'not a run file'),
        # issue 50, defect 6: a finished run without a result, or a
        # diverged one without its reason (another version's file)
        (
            '{"config": {"a": 1}, "status": "finished", "result": {}}',
            'finished run without a result',
        ),
        (
            '{"config": {"a": 1}, "status": "diverged", "result": {}}',
            "diverged run without a 'message'",
        ),
        # issue 50, defect 10: nesting deeper than the parser's recursion
        ('[' * 100000 + ']' * 100000, 'nested too deep'),
    ],
)
def test_unreadable_run_files_are_named(tmp_path, text, message):
    path = tmp_path / 'cut_0123456789ab.json'
    path.write_bytes(text.encode('latin-1'))
    with pytest.raises(ValueError, match=message) as e:
        store.read(str(path))
    assert str(path) in str(e.value)
    with pytest.warns(UserWarning, match=path.name):
        records, bad = store.scan(str(tmp_path))
    assert records == {} and bad == [str(path)]


def test_bad_status_and_configs_are_refused(tmp_path):
    with pytest.raises(ValueError, match='status must be one of'):
        store.save(str(tmp_path), CONFIG, {}, status='crashed')
    with pytest.raises(ValueError):  # NaN: not a configuration
        store.run_id({'lr': math.nan})
    with pytest.raises(TypeError):
        store.run_id({'graph': object()})
    json.dumps(CONFIG)


# Issue 50 ------------------------------------------------------------------


def test_a_finished_run_lacking_a_studys_result_counts_as_not_finished(
    tmp_path,
):
    # Defect 6: another version's file (no 'acc') read as a finished run
    # without results, shown as "diverged" and kept by --resume.
    store.save(str(tmp_path), CONFIG, {'loss': 0.1})
    assert len(store.load(str(tmp_path))) == 1  # no study fields: kept
    with pytest.warns(UserWarning, match='without the results acc'):
        records, bad = store.scan(str(tmp_path), fields=('loss', 'acc'))
    assert records == {} and bad == [store.path_of(str(tmp_path), CONFIG)]
    with pytest.warns(UserWarning):
        assert store.load(str(tmp_path), [CONFIG], fields=('acc',)) == []
    with pytest.raises(ValueError, match='a finished run needs a result'):
        store.save(str(tmp_path), CONFIG, {})


def test_the_run_file_name_does_not_depend_on_key_order_or_tuples(tmp_path):
    # Defect 8: the slug followed the key order; defect 11: a tuple in a
    # configuration came back from JSON as a list.
    backwards = dict(reversed(list(CONFIG.items())))
    assert list(backwards) != list(CONFIG)
    assert store.run_id(backwards) == store.run_id(CONFIG)
    with_tuple = {**CONFIG, 'depths': (1, 2)}
    assert store.run_id(with_tuple) == store.run_id(
        {**CONFIG, 'depths': [1, 2]}
    )
    store.save(str(tmp_path), backwards, {'acc': 1.0})
    store.save(str(tmp_path), with_tuple, {'acc': 1.0})
    found = store.load(str(tmp_path), [CONFIG, with_tuple])
    assert [r['result'] for r in found] == [{'acc': 1.0}] * 2


def test_a_folder_named_json_is_named_not_a_crash(tmp_path):
    # Defect 10: IsADirectoryError on every invocation.
    store.save(str(tmp_path), CONFIG, {'acc': 1.0})
    (tmp_path / 'plots.json').mkdir()
    with pytest.warns(UserWarning, match='plots.json.*cannot be read'):
        records, bad = store.scan(str(tmp_path))
    assert len(records) == 1 and bad == [str(tmp_path / 'plots.json')]


def test_run_files_are_as_readable_as_other_files(tmp_path):
    # Defect 14: mkstemp's 0600 while the tables are 0644.
    old = os.umask(0o022)
    try:
        path = store.save(str(tmp_path), CONFIG, {'acc': 1.0})
        table = tmp_path / 'table.csv'
        table.write_text('x\n')
    finally:
        os.umask(old)
    assert os.stat(path).st_mode & 0o777 == os.stat(table).st_mode & 0o777


@pytest.mark.skipif(os.geteuid() == 0, reason='root reads any file')
def test_an_unreadable_run_file_is_named(tmp_path):
    # Defect 14: a raw PermissionError traceback.
    path = store.save(str(tmp_path), CONFIG, {'acc': 1.0})
    os.chmod(path, 0)
    try:
        with pytest.raises(ValueError, match='cannot be read'):
            store.read(path)
    finally:
        os.chmod(path, 0o644)


def test_permission_errors_are_named(tmp_path, monkeypatch):
    # Defect 14, as root too: open() raising PermissionError.
    path = store.save(str(tmp_path), CONFIG, {'acc': 1.0})

    def refuse(*args, **kwargs):
        raise PermissionError(13, 'Permission denied')

    monkeypatch.setattr('builtins.open', refuse)
    with pytest.raises(ValueError, match='cannot be read .Permission denied'):
        store.read(path)
