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


def test_columns_must_name_a_column():
    # Without `:columns:`, or with only commas, the table had no column:
    # the build reported a bare KeyError ('columns') or rendered an empty
    # table.
    for text in ('', ' , '):
        with pytest.raises(ValueError, match="':columns:' takes 'name' or "
                           "'name=heading' items"):  # fmt: skip
            results._pairs(text, '=', 'columns')


def _build(tmp_path, body):
    r"""The warnings of an HTML build of a page holding :obj:`body`, with
    ``benchmark/results/r.csv`` beside the docs as in the repository."""
    import io

    from sphinx.application import Sphinx

    src = tmp_path / 'docs' / 'source'
    src.mkdir(parents=True)
    (src / 'conf.py').write_text("extensions = ['gate_sphinx.results']\n")
    (src / 'index.rst').write_text(f'Title\n=====\n\n{body}\n')
    data = tmp_path / 'benchmark' / 'results'
    data.mkdir(parents=True)
    (data / 'r.csv').write_text('graph,kernel,ratio\ncora,triton,0.5\n')
    warnings = io.StringIO()
    app = Sphinx(str(src), str(src), str(tmp_path / 'out'),
                 str(tmp_path / 'doctrees'), 'html', status=None,
                 warning=warnings, freshenv=True)  # fmt: skip
    app.build()
    return warnings.getvalue()


@pytest.mark.parametrize('body, message', [
    ('.. results-table:: r.csv\n   :columns: graph, ratio=time\n'
     '   :where: kernel=triton', None),
    ('.. results-table:: missing.csv\n   :columns: graph',
     'No such file or directory'),
    ('.. results-table:: r.csv\n   :columns: graph, heads',
     "has no column 'heads'"),
    ('.. results-table:: r.csv\n   :columns: graph\n   :where: kernel=cuda',
     "no row where {'kernel': 'cuda'}"),
    ('.. results-table:: r.csv', "':columns:' takes 'name'"),
])  # fmt: skip
def test_the_directive_fails_the_build_naming_the_problem(
    tmp_path, body, message
):
    warnings = _build(tmp_path, body)
    if message is None:
        assert 'results-table' not in warnings, warnings
    else:
        assert 'ERROR: results-table: ' in warnings, warnings
        assert message in warnings, warnings


@pytest.mark.parametrize('line', ['cora,triton', 'cora,triton,0.5,9'])
def test_a_row_with_fields_not_the_headers_is_an_error(tmp_path, line):
    # A short row crashed the build (float(None) in `cell`) or, in a
    # `:where:` column only, left the row out unseen; a long row's extra
    # field was dropped unseen.
    path = tmp_path / 'r.csv'
    path.write_text(f'graph,kernel,ratio\ncora,ref,1.25\n{line}\n')
    count = len(line.split(','))
    with pytest.raises(ValueError, match=f'r.csv, line 3: {count} fields, '
                       'where the header has 3'):  # fmt: skip
        results.read_table(path, [('graph', '')], [('kernel', 'ref')])
