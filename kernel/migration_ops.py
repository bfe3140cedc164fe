"""Schema operations for live tables.

On PostgreSQL the index operations build and drop indexes CONCURRENTLY, so writers
(scanners, claims, completions) are never blocked while a large runs table is indexed; a
migration using them sets ``atomic = False``. ``OnPostgres`` applies an operation's state
as Django would, but on PostgreSQL runs the given statements instead of Django's (which may
lock or scan a large table where a cheaper statement does the same). ``Fillfactor`` sets a
table's fillfactor on PostgreSQL. On the embedded SQLite all of them are Django's plain
operations, or nothing.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db.migrations.operations import AddIndex, RemoveIndex
from django.db.migrations.operations.base import Operation


class _OnlineIndexOperation:
    concurrent: type
    plain: type

    def _chosen(self, schema_editor) -> type:
        return self.concurrent if schema_editor.connection.vendor == "postgresql" else self.plain

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        self._chosen(schema_editor).database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        self._chosen(schema_editor).database_backwards(self, app_label, schema_editor, from_state, to_state)


class AddIndexOnline(_OnlineIndexOperation, AddIndexConcurrently):
    concurrent, plain = AddIndexConcurrently, AddIndex


class RemoveIndexOnline(_OnlineIndexOperation, RemoveIndexConcurrently):
    concurrent, plain = RemoveIndexConcurrently, RemoveIndex


class OnPostgres(Operation):
    """``operation``; on PostgreSQL, its database change made by ``sql`` (forwards) and
    ``reverse_sql`` (backwards) instead."""

    def __init__(self, operation: Operation, sql: list[str], reverse_sql: list[str]):
        self.operation, self.sql, self.reverse_sql = operation, sql, reverse_sql

    @property
    def reversible(self) -> bool:
        return self.operation.reversible

    def state_forwards(self, app_label, state):
        self.operation.state_forwards(app_label, state)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return self.operation.database_forwards(app_label, schema_editor, from_state, to_state)
        for statement in self.sql:
            schema_editor.execute(statement)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return self.operation.database_backwards(app_label, schema_editor, from_state, to_state)
        for statement in self.reverse_sql:
            schema_editor.execute(statement)

    def describe(self) -> str:
        return f"{self.operation.describe()} (on PostgreSQL by its own statements)"


class Fillfactor(Operation):
    """``table`` fills its pages to ``fillfactor`` percent on PostgreSQL (backwards: the
    default again). A SHARE UPDATE EXCLUSIVE lock (readers and writers go on); nothing is
    rewritten, pages written from then on keep the room. SQLite has no fillfactor."""

    reduces_to_sql = False

    def __init__(self, table: str, fillfactor: int):
        self.table, self.fillfactor = table, fillfactor

    def state_forwards(self, app_label, state):
        pass

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"ALTER TABLE {self.table} SET (fillfactor = {self.fillfactor})")

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"ALTER TABLE {self.table} RESET (fillfactor)")

    def describe(self) -> str:
        return f"{self.table} fills its pages to {self.fillfactor} % (on PostgreSQL)"
