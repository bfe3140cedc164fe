"""Model instances from rows read by statements written out, built without ``Model.__init__``.

Django builds each instance it reads through ``__init__``, which sets every field through its
descriptor: about 30 µs for a run, 1.5 ms for a page of 50 against 0.3 ms to fetch the rows.
The reads every request or claim makes (a run, its attempts, a history page, a claim's
candidates) build theirs here instead: the row's values go straight into the instance's
``__dict__``, converted as Django converts them (its compiler's own converters: SQLite's
instants and booleans, JSON), so the instance is what ``from_db`` would give. Fields left
out of the statement are deferred, loaded when read, as with ``.only()``. No ``pre_init`` or
``post_init`` signal is sent: no model read here has receivers (tests/test_rows.py checks).
"""

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models.base import ModelState
from django.db.models.sql import Query

from kernel.connections import statement_cursor


class Rows:
    """How a statement's columns become instances of ``model``: ``fields`` (names of its
    fields; by default every column of its table, less those named in ``exclude``) in their
    select order, then the ``extra`` columns, set as plain attributes (a joined table's
    column, say) without conversion."""

    def __init__(self, model, fields=None, *, exclude=(), extra=()):
        self.model = model
        if fields is None:
            fields = [field.name for field in model._meta.concrete_fields if field.name not in exclude]
        self.fields = [model._meta.get_field(name) for name in fields]
        self.attnames = [field.attname for field in self.fields] + list(extra)
        self._converters_by_vendor: dict[str, list] = {}

    def columns(self, alias: str) -> str:
        """The fields' columns for a SELECT list, qualified by the table's ``alias``."""
        return ", ".join(f"{alias}.{connection.ops.quote_name(field.column)}" for field in self.fields)

    def read(self, sql: str, params, *, prepared: bool = False) -> list:
        """The instances of the rows ``sql`` selects (its columns as this reader's);
        ``prepared``: through a statement PostgreSQL prepares (kernel.connections.statement_cursor)."""
        with statement_cursor(prepared=prepared) as cursor:
            cursor.execute(sql, params)
            return self.build(cursor.fetchall())

    def build(self, rows, *, converted: bool = False) -> list:
        """Instances of ``rows`` (tuples of this reader's columns; any further ones are left);
        ``converted``: the values are already Python's (an ORM ``values_list``)."""
        model, attnames = self.model, self.attnames
        convert = None if converted else self._converters()
        built = []
        for row in rows:
            if convert:
                row = list(row)
                for position, converters, expression in convert:
                    value = row[position]
                    for converter in converters:
                        value = converter(value, expression, connection)
                    row[position] = value
            instance = model.__new__(model)
            instance.__dict__.update(zip(attnames, row))
            state = instance._state = ModelState()
            state.adding, state.db = False, DEFAULT_DB_ALIAS
            built.append(instance)
        return built

    def _converters(self) -> list:
        """(position, converters, expression) of each column Django converts on this kind of
        database: the converters a query of these fields gets, asked of its compiler once."""
        found = self._converters_by_vendor.get(connection.vendor)
        if found is None:
            table = self.model._meta.db_table
            compiler = connection.ops.compiler("SQLCompiler")(Query(self.model), connection, DEFAULT_DB_ALIAS)
            found = [(position, converters, expression) for position, (converters, expression)
                     in compiler.get_converters([field.get_col(table) for field in self.fields]).items()]
            self._converters_by_vendor[connection.vendor] = found
        return found
