"""The gated team jobs (tests.gated_jobs) for tests with real worker processes: declared in
this process too (the catalog needs them), the registry put back after; the children
``processes`` starts share the test's PostgreSQL database and the gate directory."""

import io
import sys

import pytest
from django.core.management import call_command

from tests.child_env import database_url_of_test_db
from workers.jobs import framework

GATED_MODULE = "tests.gated_jobs"


@pytest.fixture
def gated_jobs(monkeypatch, processes, tmp_path):
    monkeypatch.setattr(framework, "JOBS", dict(framework.JOBS))
    monkeypatch.delitem(sys.modules, GATED_MODULE, raising=False)
    __import__(GATED_MODULE)
    call_command("sync_job_types", stdout=io.StringIO())
    gate = tmp_path / "gate"
    gate.mkdir()
    processes.env.pop("REDIS_URL", None)
    processes.env.update({
        "DATABASE_URL": database_url_of_test_db(), "OBJECT_STORE_URL": f"file://{tmp_path}/objects",
        "SCHEDULER_JOB_MODULES": GATED_MODULE, "JOB_GATE": str(gate),
    })
    module = sys.modules[GATED_MODULE]
    module.gate = gate
    return module
