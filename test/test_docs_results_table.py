r"""``gate_sphinx.results``: the benchmark page's tables, read from the
committed result CSVs."""

import pytest

pytest.importorskip('sphinx')
from gate_sphinx import results  # noqa: E402


def test_cells_as_the_table_shows_them():
    assert [results.cell(v) for v in ('', 'GATE', '999937', '0.2817',
                                      '4043.6', '1.0')] == [
        '-', 'GATE', '999,937', '0.282', '4,044', '1'
    ]  # fmt: skip


def test_read_table_selects_columns_and_rows(tmp_path):
    path = tmp_path / 'r.csv'
    path.write_text('graph,kernel,ratio\ncora,triton,0.5\ncora,ref,1.25\n')
    header, rows = results.read_table(
        path, [('graph', ''), ('ratio', 'time')], [('kernel', 'triton')]
    )
    assert header == ['graph', 'time']
    assert rows == [['cora', '0.5']]


def test_read_table_names_a_missing_column_and_an_empty_selection(tmp_path):
    path = tmp_path / 'r.csv'
    path.write_text('graph,ratio\ncora,0.5\n')
    with pytest.raises(ValueError, match="no column 'heads'; its columns: "
                       'graph, ratio'):  # fmt: skip
        results.read_table(path, [('heads', '')], [])
    with pytest.raises(ValueError, match='no row where'):
        results.read_table(path, [('graph', '')], [('graph', 'arxiv')])


def test_where_takes_column_value_pairs():
    assert results._pairs('a=1, b=x', '=', 'where') == [('a', '1'), ('b', 'x')]
    with pytest.raises(ValueError, match="'column=value'"):
        results._pairs('kernel', '=', 'where')
