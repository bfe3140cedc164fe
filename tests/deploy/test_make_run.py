"""`make run` on a server database checks its secrets first: a refused start says in one line
what to set, exits non-zero and writes nothing (no migration, no demo tenant)."""

import subprocess

import psycopg
import pytest

from tests.deploy.compose import ROOT
from tests.deploy.test_readme_try_it import fresh_shell_env, installed_venv
from tests.e2e.processes import PYTHON
from tests.servers import free_port, shared_redis_url


def make_run(tmp_path, **env) -> subprocess.CompletedProcess:
    """`make run` from the repository, its var/ under tmp_path, with this interpreter's venv
    marked installed (as README's "Try it" test does)."""
    venv = installed_venv(tmp_path)
    return subprocess.run(
        ["make", "--no-print-directory", "run", f"PORT={free_port()}", f"VENV={venv}", f"PY={PYTHON}"],
        cwd=ROOT, env=fresh_shell_env(tmp_path / "var") | env, capture_output=True, text=True, timeout=300,
    )


def public_tables(database_url: str) -> list[str]:
    with psycopg.connect(database_url) as connection:
        rows = connection.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return [name for (name,) in rows]


@pytest.mark.parametrize("secret_key, refusal", [
    (None, "SECRET_KEY is not set"),
    ("replace-with-a-long-random-string", "SECRET_KEY is still the placeholder of .env.example"),
], ids=["unset", "placeholder"])
def test_make_run__server_database_without_a_real_secret_key__refused_before_anything_is_written(
    tmp_path, fresh_database_url, secret_key, refusal
):
    env = {"DATABASE_URL": fresh_database_url,
           "REDIS_URL": shared_redis_url()}
    if secret_key:
        env["SECRET_KEY"] = secret_key
    done = make_run(tmp_path, **env)

    assert done.returncode != 0
    said = [line for line in done.stderr.splitlines() if not line.startswith("make")]  # make adds "Error 1"
    assert len(said) == 1 and refusal in said[0] and "set" in said[0], done.stderr
    assert "Traceback" not in done.stderr
    assert public_tables(fresh_database_url) == []  # migrate never ran
    assert not (tmp_path / "var" / "demo-token").exists()
