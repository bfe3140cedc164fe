"""The hot path's statements on the embedded SQLite: registering and recording uploads, and
the group commit, are the same SQL texts as on PostgreSQL
(runs.authority.statements.dialect.input_rows), so the tests that pin their behaviour run
again here on SQLite, as `make run` has it, with the ownership rule's table of every path
that acts for an attempt, and the attempts' deadlines (set at the claim, restarted at a
batch's later start, capping every lease); so do those of overlap and misfire policies, whose
claims and scans write rows back with runs.authority.statements.rows.bulk_set (one statement
per database, each its own SQL), the plans of the hot statements over a million finished
runs, and the statement catalogue's own suite (tests/runs/test_statements.py); and the API's
token and run reads, written out as SQL texts (schedules.selectors.live_token,
runs.selectors), with the tests of tokens and of runs, their history pages included, and
of the instances kernel.rows builds from such rows.

They run in a child pytest with nothing configured (SQLite under the test's own var/),
since this process's database is PostgreSQL; the fencing races run too, each of their
threads on its own connection to the SQLite file. Left out: the PostgreSQL-only drill that
terminates a backend mid-group."""

import os
import re
import subprocess
import sys

from tests.e2e.embedded import UNSET
from tests.e2e.processes import ROOT

MODULES = [
    "tests/concurrency/test_group_commit.py",
    "tests/concurrency/test_fencing_races.py",
    "tests/runs/test_stage_retry.py",
    "tests/runs/test_authority_flow.py",
    "tests/runs/test_ownership_rule.py",
    "tests/runs/test_attempt_deadlines.py",
    "tests/workers/test_runtime.py",
    "tests/runs/test_overlap_policies.py",
    "tests/runs/test_misfire_catch_up.py",
    "tests/runs/test_hot_path_plans.py::test_hot_path__each_statement_reads_the_index_meant_for_it",
    "tests/runs/test_hot_path_plans.py::test_api_reads__prepared__their_generic_plans_read_the_same_indexes",
    "tests/runs/test_statements.py",
    "tests/api/test_auth.py",
    "tests/api/test_runs_api.py",
    "tests/test_rows.py",
]


def test_hot_path_tests__pass_on_the_embedded_sqlite(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in UNSET} | {"SCHEDULER_VAR_DIR": str(tmp_path / "var")}
    vendor = "from django.db import connection; print(connection.vendor)"
    assert _python(env, f"import django; django.setup(); {vendor}").strip() == "sqlite"

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "not pg_terminate_backend", *MODULES],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    # Every selected test ran and passed: nothing skipped, nothing deselected but the drill.
    summary = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"=* ?\d+ passed, 1 deselected in .*", summary), summary


def _python(env: dict, code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                          env=env | {"DJANGO_SETTINGS_MODULE": "scheduler_project.settings"}).stdout
