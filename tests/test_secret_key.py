"""Web, workers and loops refuse to start with DEBUG off and no SECRET_KEY, or with a secret
still at its .env.example placeholder; the embedded `make run` generates a key into var/ once
and every later start reuses it."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kernel.startup import embedded_secret_key_ensure
from tests.deploy.compose import DOTENV_EXAMPLE, compose_services, read_dotenv

ROOT = Path(__file__).resolve().parents[1]
SERVER_DATABASE = "postgresql://postgres@127.0.0.1:5432/not-needed-to-refuse"


def child_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG", "DATABASE_URL", "REDIS_URL")}
    return {**env, "DJANGO_SETTINGS_MODULE": "scheduler_project.settings", **extra}


def start(argv, **extra) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, env=child_env(**extra), capture_output=True, text=True, timeout=120)


WEB = [sys.executable, "-c", "import scheduler_project.wsgi"]


@pytest.mark.parametrize("argv", [
    pytest.param(WEB, id="web"),
    pytest.param([sys.executable, "manage.py", "scan", "--once"], id="scan"),
    pytest.param([sys.executable, "manage.py", "effects", "--once"], id="effects"),
    pytest.param([sys.executable, "manage.py", "dispatch"], id="dispatch"),
    pytest.param([sys.executable, "-m", "celery", "-A", "scheduler_project", "worker", "-Q", "short", "--pool", "solo",
                  "--without-gossip", "--without-mingle"], id="celery-worker"),
])
def test_start__without_secret_key_is_refused(argv):
    refused = start(argv, DATABASE_URL=SERVER_DATABASE)
    assert refused.returncode != 0
    assert "SECRET_KEY is not set" in refused.stdout + refused.stderr


def test_start__with_a_secret_key_or_in_debug_goes_ahead():
    assert start(WEB, DATABASE_URL=SERVER_DATABASE, SECRET_KEY="a-real-secret").returncode == 0
    assert start(WEB, DATABASE_URL=SERVER_DATABASE, DEBUG="1").returncode == 0


def test_start__with_the_secrets_of_dotenv_example_unchanged_is_refused(tmp_path):
    # What the web container gets when .env.example is copied to .env and nothing replaced.
    env = compose_services()["web"].environment(read_dotenv(DOTENV_EXAMPLE))
    refused = start(WEB, **env | {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")})
    assert refused.returncode != 0
    refusal = [line for line in refused.stderr.splitlines() if "placeholder" in line]
    assert len(refusal) == 1, refused.stderr
    for name in ("SECRET_KEY", "METRICS_TOKEN", "the password in DATABASE_URL", "AWS_SECRET_ACCESS_KEY"):
        assert name in refusal[0]


PLACEHOLDER = "replace-me"


@pytest.mark.parametrize("secret", [
    {"SECRET_KEY": PLACEHOLDER},
    {"METRICS_TOKEN": PLACEHOLDER},
    {"DATABASE_URL": f"postgresql://scheduler:{PLACEHOLDER}@127.0.0.1:5432/not-needed-to-refuse"},
    {"AWS_SECRET_ACCESS_KEY": PLACEHOLDER},
], ids=["secret-key", "metrics-token", "database-password", "s3-secret"])
def test_start__web_with_one_placeholder_secret_is_refused(secret):
    refused = start(WEB, **{"DATABASE_URL": SERVER_DATABASE, "SECRET_KEY": "a-real-secret"} | secret)
    assert refused.returncode != 0
    assert "still the placeholder of .env.example" in refused.stderr


@pytest.mark.parametrize("argv", [
    pytest.param([sys.executable, "manage.py", "scan", "--once"], id="scan"),
    pytest.param([sys.executable, "manage.py", "dispatch"], id="dispatch"),
    pytest.param([sys.executable, "-m", "celery", "-A", "scheduler_project", "worker", "-Q", "short", "--pool", "solo",
                  "--without-gossip", "--without-mingle"], id="celery-worker"),
])
def test_start__workers_and_loops_with_a_placeholder_secret_are_refused(argv):
    refused = start(argv, DATABASE_URL=SERVER_DATABASE, SECRET_KEY="a-real-secret", METRICS_TOKEN=PLACEHOLDER)
    assert refused.returncode != 0
    assert "METRICS_TOKEN is still the placeholder of .env.example" in refused.stdout + refused.stderr


def test_embedded_key__generated_once_private_and_read_by_every_embedded_process(tmp_path):
    key_file = tmp_path / "var" / "secret-key"
    embedded_secret_key_ensure(key_file)
    first = key_file.read_text()
    embedded_secret_key_ensure(key_file)
    assert key_file.read_text() == first and len(first.strip()) >= 50
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600

    read_key = [sys.executable, "-c",
                "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"]
    embedded = start(read_key, SCHEDULER_VAR_DIR=str(tmp_path / "var"))
    assert embedded.stdout.strip() == first.strip()
    assert start(WEB, SCHEDULER_VAR_DIR=str(tmp_path / "var")).returncode == 0
    # A server database never reads the embedded file: production configures its own key.
    assert "SECRET_KEY is not set" in start(WEB, SCHEDULER_VAR_DIR=str(tmp_path / "var"),
                                            DATABASE_URL=SERVER_DATABASE).stderr
