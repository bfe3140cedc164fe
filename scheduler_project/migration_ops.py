"""Index operations for live tables.

On PostgreSQL they build and drop indexes CONCURRENTLY, so writers (scanners, claims,
completions) are never blocked while a large runs table is indexed; a migration using them
sets ``atomic = False``. On the embedded SQLite they are plain index operations.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db.migrations.operations import AddIndex, RemoveIndex


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
