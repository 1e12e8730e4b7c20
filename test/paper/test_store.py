import json
import math
import os

import pytest

from gate_paper import store

CONFIG = {'dataset': 'er8', 'model': 'GATE_S', 'num_layers': 5, 'lr': 0.005}


def test_run_file_round_trip(tmp_path):
    result = {'acc': 0.5, 'nan': math.nan, 'alphas': [0.25, math.inf]}
    path = store.save(str(tmp_path), CONFIG, result)
    assert os.path.basename(path).startswith('er8_GATE_S_5_0.005_')
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
