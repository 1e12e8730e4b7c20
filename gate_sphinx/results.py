r"""Tables of the committed benchmark results, built from their CSV files.

The directive

.. code-block:: rst

    .. results-table:: cpu-pair.csv
       :columns: graph, heads, variant, ratio=time / GATv2Conv
       :where: mode=train, layer=GATE

shows the rows of ``benchmark/results/cpu-pair.csv`` that match every
``:where:`` condition, with the ``:columns:`` named (``name=heading``
renames one), and under the table a link to the whole file (every column,
every row). The page thus quotes the committed file itself: a rerun of the
benchmark updates it, and a column that leaves the file fails the build.
Numbers are shown to three significant digits, integers with thousands
separators, an empty cell as ``-``.
"""

import csv
import os
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

# The results folder, relative to the documentation's source folder.
RESULTS = Path('..', '..', 'benchmark', 'results')


def _pairs(text, sep, what):
    out = []
    for item in (part.strip() for part in text.split(',')):
        if not item:
            continue
        key, _, value = item.partition(sep)
        if what == 'where' and not value:
            raise ValueError(
                f"':where:' takes 'column=value' conditions, got {item!r}"
            )
        out.append((key.strip(), value.strip()))
    if what == 'columns' and not out:
        raise ValueError(
            "':columns:' takes 'name' or 'name=heading' items, "
            f'comma-separated (got {text!r})'
        )
    return out


def cell(text):
    r"""A CSV field as the table shows it."""
    if text == '':
        return '-'
    try:
        number = float(text)
    except ValueError:
        return text
    if number.is_integer() and '.' not in text and 'e' not in text:
        return f'{int(number):,}'
    if abs(number) >= 100:
        return f'{number:,.0f}'
    return f'{number:.3g}'


def read_table(path, columns, where):
    r"""The header and rows of the CSV file :obj:`path`: the
    :obj:`columns` (``(name, heading)`` pairs; an empty heading keeps the
    name) of the rows where every ``(name, value)`` of :obj:`where` holds.
    An unknown column is a :class:`ValueError` that names the file's, and
    so is a row whose fields are not the header's."""
    with open(path, newline='') as f:
        reader = csv.DictReader(f)
        names = reader.fieldnames or []
        rows = []
        for row in reader:
            # (DictReader files extra fields under None, fills missing ones
            # with None.)
            fields = [v for k, v in row.items() if k is not None]
            count = len(fields) - fields.count(None) + len(row.get(None, []))
            if count != len(names):
                raise ValueError(
                    f'{path}, line {reader.line_num}: {count} fields, '
                    f'where the header has {len(names)}'
                )
            rows.append(row)
    unknown = [c for c, _ in list(columns) + list(where) if c not in names]
    if unknown:
        raise ValueError(
            f'{path} has no column {", ".join(map(repr, unknown))}; '
            f'its columns: {", ".join(names)}'
        )
    rows = [r for r in rows if all(r[c] == v for c, v in where)]
    if not rows:
        raise ValueError(f'{path}: no row where {dict(where)}')
    header = [heading or name for name, heading in columns]
    return header, [[cell(r[name]) for name, _ in columns] for r in rows]


class ResultsTable(SphinxDirective):
    r"""``.. results-table:: name.csv``: some columns and rows of a
    committed result, and a link to all of it."""

    required_arguments = 1
    has_content = False
    option_spec = {
        'columns': directives.unchanged_required,
        'where': directives.unchanged,
    }

    def run(self):
        srcdir = Path(self.env.srcdir)
        path = (srcdir / RESULTS / self.arguments[0]).resolve()
        try:
            columns = _pairs(self.options.get('columns', ''), '=', 'columns')
            where = _pairs(self.options.get('where', ''), '=', 'where')
            header, rows = read_table(path, columns, where)
        except (OSError, KeyError, ValueError) as e:
            raise self.error(f'results-table: {e}') from e
        self.env.note_dependency(str(path))
        docdir = Path(self.env.doc2path(self.env.docname)).parent
        rel = Path(os.path.relpath(path, docdir)).as_posix()
        link = nodes.section()
        link.document = self.state.document
        self.state.nested_parse(
            StringList(
                [f'Every column and row: :download:`{path.name} <{rel}>`.'],
                source=self.get_source_info()[0],
            ),
            self.content_offset,
            link,
            match_titles=False,
        )
        return [table(header, rows), *link.children]


def table(header, rows):
    r"""A docutils table of text cells."""
    group = nodes.tgroup(cols=len(header))
    group += [nodes.colspec(colwidth=1) for _ in header]

    def row(values):
        out = nodes.row()
        for value in values:
            out += nodes.entry('', nodes.paragraph(text=value))
        return out

    group += nodes.thead('', row(header))
    group += nodes.tbody('', *map(row, rows))
    return nodes.table('', group, classes=['results-table'])


def setup(app):
    app.add_directive('results-table', ResultsTable)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
