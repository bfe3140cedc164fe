"""The API fixtures (tenant clients, worker clients, the file object store)."""

from tests.api.conftest import client, file_objects, other_client, other_tenant, worker, worker_client

__all__ = ["client", "file_objects", "other_client", "other_tenant", "worker", "worker_client"]
