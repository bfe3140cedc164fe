"""The production settings of docs/operations.md, read from the doc itself: with them
`manage.py check --deploy` finds nothing, each one comes from the environment, and compose and
.env.example carry every one of them."""

import os
import re
import secrets
import subprocess
import sys

from tests.deploy.compose import DOTENV_EXAMPLE, ROOT, compose_services
from tests.servers import shared_redis_url

OPERATIONS = ROOT / "docs" / "operations.md"


def documented_production_environment() -> dict[str, str]:
    """The first sh block of the "Production settings" section, `NAME=value  # comment` lines."""
    section = OPERATIONS.read_text().split("\n## Production settings\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, flags=re.DOTALL).group(1)
    pairs = (line.split("#", 1)[0].strip().split("=", 1) for line in block.splitlines() if line.strip())
    return {name: value for name, value in pairs}


def manage(*argv, **env) -> subprocess.CompletedProcess:
    # A process with none of the test run's settings but the databases it is given.
    base = {key: value for key, value in os.environ.items()
            if key in ("PATH", "HOME", "LANG", "TMPDIR") or key.startswith("PYTHON")}
    return subprocess.run([sys.executable, "manage.py", *argv], cwd=ROOT, env=base | env, capture_output=True,
                          text=True, timeout=120)


def production_secrets() -> dict[str, str]:
    return {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "METRICS_TOKEN": secrets.token_urlsafe(32),
        "DATABASE_URL": os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/scheduler"),
        "REDIS_URL": shared_redis_url(),
    }


def test_check_deploy__the_documented_production_environment_has_no_issues():
    documented = documented_production_environment()
    assert {"SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE",
            "SECURE_PROXY_SSL_HEADER"} <= set(documented)
    done = manage("check", "--deploy", "--fail-level", "WARNING", **production_secrets() | documented)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


def test_check_deploy__without_the_documented_settings_names_what_is_missing():
    # The settings above come from the environment: leave them out and the same check warns.
    done = manage("check", "--deploy", "--fail-level", "WARNING", **production_secrets())
    assert done.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in done.stderr, done.stderr


def test_production_settings__each_comes_from_the_environment():
    shown = manage("shell", "--verbosity", "0", "-c", "; ".join([
        "from django.conf import settings as s",
        "print(s.SECURE_PROXY_SSL_HEADER, s.SESSION_COOKIE_SECURE, s.AXES_FAILURE_LIMIT, s.AXES_COOLOFF_TIME,"
        " s.AXES_IPWARE_META_PRECEDENCE_ORDER, s.AXES_IPWARE_PROXY_ORDER, s.SECURE_HSTS_SECONDS)",
    ]), **production_secrets() | {
        "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto", "SECURE_SSL_REDIRECT": "1", "SECURE_HSTS_SECONDS": "",
        "LOGIN_FAILURE_LIMIT": "3", "LOGIN_COOLOFF_MINUTES": "2", "TRUST_X_FORWARDED_FOR": "1",
    })
    assert shown.stdout.strip() == (
        "('HTTP_X_FORWARDED_PROTO', 'https') True 3 0:02:00 ('HTTP_X_FORWARDED_FOR', 'REMOTE_ADDR') right-most 0"
    ), shown.stdout + shown.stderr


def test_production_settings__compose_and_dotenv_example_carry_each_one():
    scheduler_env = compose_services()["web"].spec["environment"]
    example = DOTENV_EXAMPLE.read_text()
    for name in documented_production_environment():
        if name != "PUBLIC_BASE_URL":
            assert scheduler_env[name] == f"${{{name}:-}}", name  # unset in .env: the settings' default
        assert re.search(rf"^# {name}=", example, flags=re.MULTILINE), f".env.example does not mention {name}"
