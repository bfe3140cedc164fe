"""What child processes need to share this test's world (the test database, and in Redis
mode the broker and the bucket too), or not to share it: a new user's shell."""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager

import pytest


# What a fresh shell has: no scheduler configuration of the test run's.
NOT_INHERITED = {"DATABASE_URL", "REDIS_URL", "OBJECT_STORE_URL", "SECRET_KEY", "PUBLIC_BASE_URL", "ALLOWED_HOSTS",
                 "S3_ENDPOINT_URL", "EMAIL_HOST", "PROMETHEUS_MULTIPROC_DIR", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}


def fresh_shell_env(var_dir) -> dict:
    """A new user's shell: this one's environment without the test run's scheduler settings,
    the installation's var/ at ``var_dir``."""
    env = {key: value for key, value in os.environ.items() if key not in NOT_INHERITED}
    return env | {"SCHEDULER_VAR_DIR": str(var_dir), "PYTHONUNBUFFERED": "1"}


def database_url_of_test_db() -> str:
    """DATABASE_URL of the database pytest-django created, for processes started by a test."""
    from django.db import connection

    s = connection.settings_dict
    if s["ENGINE"] != "django.db.backends.postgresql":
        pytest.skip("child processes share the test database over PostgreSQL")
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgresql://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


@contextmanager
def redis_mode(processes, settings, *, redis_url: str, s3_endpoint: str, bucket_prefix: str):
    """This process and the children ``processes`` starts share one database, broker and a
    fresh bucket; the Celery app publishes to that broker until the block ends."""
    from objectstore import get_object_store
    from tests.servers import broker

    bucket_url = f"s3://{bucket_prefix}-{uuid.uuid4().hex[:12]}"
    processes.env.update({
        "DATABASE_URL": database_url_of_test_db(),
        "REDIS_URL": redis_url,
        "OBJECT_STORE_URL": bucket_url,
        "S3_ENDPOINT_URL": s3_endpoint,
        # Hints lost with the broker are republished within seconds, not the default 30.
        "RELAY_REPUBLISH_AFTER_SECONDS": "5",
    })
    settings.OBJECT_STORE_URL = bucket_url
    settings.S3_ENDPOINT_URL = s3_endpoint
    settings.REDIS_URL = settings.CELERY_BROKER_URL = redis_url
    get_object_store.cache_clear()
    get_object_store().ensure_ready()
    try:
        with broker(redis_url):
            yield
    finally:
        get_object_store.cache_clear()
