"""What a Django team types out of habit works on both databases, each command a real
`manage.py` process in a fresh installation (a new database, its own var/, a new user's
environment): migrate, createsuperuser --noinput, shell -c, collectstatic --noinput, and
runserver answering HTTP on a free port."""

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.child_env import fresh_shell_env
from tests.e2e.processes import PYTHON, ROOT
from tests.servers import free_port, fresh_postgresql_database, wait_for_port

DEVELOPER_KEY = "habits-" + "k" * 50


def manage(env: dict, *args: str, **extra_env) -> subprocess.CompletedProcess:
    done = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env={**env, **extra_env},
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def clean(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module", params=["postgresql", "sqlite"])
def installation(request, tmp_path_factory):
    """A migrated installation's environment; on PostgreSQL with the SECRET_KEY a server
    database needs, on SQLite none (the embedded mode makes its own)."""
    env = fresh_shell_env(tmp_path_factory.mktemp(request.param) / "var")
    if request.param == "sqlite":
        clean(manage(env, "migrate", "--noinput"))
        yield env
        return
    with fresh_postgresql_database("habits") as url:
        env |= {"DATABASE_URL": url, "SECRET_KEY": DEVELOPER_KEY}
        clean(manage(env, "migrate", "--noinput"))
        yield env


def test_migrate__again_has_nothing_to_apply(installation):
    assert "No migrations to apply." in clean(manage(installation, "migrate", "--noinput"))


def test_createsuperuser_noinput__a_staff_user_the_shell_finds(installation):
    clean(manage(installation, "createsuperuser", "--noinput", DJANGO_SUPERUSER_USERNAME="ops",
                 DJANGO_SUPERUSER_EMAIL="ops@example.com", DJANGO_SUPERUSER_PASSWORD="a-long-password-42"))
    found = clean(manage(installation, "shell", "-c", "from django.contrib.auth.models import User; "
                         "u = User.objects.get(username='ops'); print(u.is_staff, u.is_superuser, "
                         "u.check_password('a-long-password-42'))"))
    assert found.strip().splitlines()[-1] == "True True True"  # after shell's automatic imports line


def test_collectstatic__the_docs_pages_files_under_var_static(installation):
    clean(manage(installation, "collectstatic", "--noinput"))
    static = Path(installation["SCHEDULER_VAR_DIR"]) / "static"
    assert (static / "drf_spectacular_sidecar" / "redoc" / "bundles" / "redoc.standalone.js").is_file()
    assert (static / "drf_spectacular_sidecar" / "swagger-ui-dist" / "swagger-ui-bundle.js").is_file()
    assert (static / "scheduler" / "favicon.svg").is_file()


def test_runserver__answers_http_through_the_database(installation):
    port = free_port()
    server = subprocess.Popen([PYTHON, "manage.py", "runserver", f"127.0.0.1:{port}"], cwd=ROOT, env=installation,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        wait_for_port(port, server, timeout=30)
        # An unknown token is looked up in the database before it is refused.
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/schedules",
                                         headers={"Authorization": "Bearer not-a-token"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10)
        assert refused.value.code == 401
        assert "code" in json.loads(refused.value.read())["error"]
    finally:
        os.killpg(server.pid, signal.SIGINT)
        output = server.communicate(timeout=20)[0]
        print(output)  # shown when the test fails
    assert "Traceback" not in output, output
    assert f"Starting development server at http://127.0.0.1:{port}/" in output
    if "DATABASE_URL" not in installation:  # embedded: a key of its own, as `make run` makes
        assert (Path(installation["SCHEDULER_VAR_DIR"]) / "secret-key").is_file()


def test_runserver_on_postgresql_without_secret_key__refused_in_one_line(tmp_path):
    """(The embedded mode makes its own key: test_runserver__answers_http_through_the_database.)"""
    with fresh_postgresql_database("habits_no_key") as url:
        without_key = fresh_shell_env(tmp_path / "var") | {"DATABASE_URL": url}
        done = manage(without_key, "runserver", f"127.0.0.1:{free_port()}")
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1 and "SECRET_KEY is not set" in done.stderr, done.stderr
