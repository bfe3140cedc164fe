"""Index operations for live tables.

On PostgreSQL they build and drop indexes CONCURRENTLY, so writers (scanners, claims,
completions) are never blocked while a large runs table is indexed; a migration using them
sets ``atomic = False``. On the embedded SQLite they are plain index operations.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db.migrations.operations import AddIndex, RemoveIndex


class AddIndexOnline(AddIndexConcurrently):
    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        plain = schema_editor.connection.vendor != "postgresql"
        (AddIndex if plain else AddIndexConcurrently).database_forwards(
            self, app_label, schema_editor, from_state, to_state
        )

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        plain = schema_editor.connection.vendor != "postgresql"
        (AddIndex if plain else AddIndexConcurrently).database_backwards(
            self, app_label, schema_editor, from_state, to_state
        )


class RemoveIndexOnline(RemoveIndexConcurrently):
    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        plain = schema_editor.connection.vendor != "postgresql"
        (RemoveIndex if plain else RemoveIndexConcurrently).database_forwards(
            self, app_label, schema_editor, from_state, to_state
        )

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        plain = schema_editor.connection.vendor != "postgresql"
        (RemoveIndex if plain else RemoveIndexConcurrently).database_backwards(
            self, app_label, schema_editor, from_state, to_state
        )
