"""docker-compose.yml without Docker: every service's command starts the way its container would.

PostgreSQL (a fresh database) behind a private PgBouncer in transaction pooling mode, Redis,
a moto S3 server and an SMTP sink stand in for the compose infrastructure; everything else is
the compose file's own commands and environment.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kernel.startup import PLACEHOLDER_PREFIX
from tests.deploy.compose import (
    DOTENV_EXAMPLE,
    ROOT,
    MissingVariable,
    compose_services,
    image_environment,
    image_project_build_steps,
    read_dotenv,
    readme_production_services,
    start_order,
)
from tests.e2e.processes import Processes, wait_until
from tests.effects.helpers import start_smtp_sink
from tests.servers import free_port, pgbouncer_in_front_of, stop_process

# Compose services the test provides itself; a new one needs a stand-in here.
STAND_INS = {"postgres", "pgbouncer", "redis", "minio", "mailpit"}
_STAND_IN_HOST = re.compile(r"(^|//|@)(%s)(:\d|/|$)" % "|".join(STAND_INS))
ONE_SHOT_TIMEOUT = 180
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def test_readme_production_shape__lists_exactly_the_compose_services():
    assert readme_production_services() == set(compose_services())


def test_compose__infrastructure_images_are_pinned_and_waited_for():
    services = compose_services()
    assert {s.name for s in services.values() if not s.built_here} == STAND_INS
    for name in STAND_INS:
        image = services[name].spec["image"]
        tag = image.rpartition(":")[2]
        assert ":" in image and tag != "latest" and re.search(r"\d", tag), image
        assert "healthcheck" in services[name].spec, f"{name} has no healthcheck to wait for"
    for service in services.values():
        for dependency in service.waits_for("service_healthy"):
            assert "healthcheck" in services[dependency].spec, (service.name, dependency)
        assert service.waits_for("service_started") == set(), f"{service.name} does not wait for readiness"


def test_dockerignore__keeps_local_state_out_of_the_image():
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert {".git", ".venv", "var", ".pytest_cache", ".hypothesis", "**/__pycache__"} <= ignored


@pytest.fixture
def mailbox(tmp_path):
    directory = tmp_path / "mailbox"
    directory.mkdir()
    process, port = start_smtp_sink(directory)
    yield directory, port
    stop_process(process)


class ComposeRun:
    """The compose services as local processes in one temporary directory. `stand_ins` replace
    environment values for every service, `service_stand_ins[name]` for one service."""

    def __init__(self, tmp_path: Path, stand_ins: dict[str, str], service_stand_ins: dict[str, dict[str, str]]):
        self.tmp_path = tmp_path
        self.stand_ins = stand_ins
        self.service_stand_ins = service_stand_ins
        self.ports = {8000: free_port()}
        # What a user copies to .env, every placeholder replaced as they must.
        self.dotenv = {key: secrets.token_urlsafe(32) if value.startswith(PLACEHOLDER_PREFIX) else value
                       for key, value in read_dotenv(DOTENV_EXAMPLE).items()}
        self.image_var = tmp_path / "image-var"
        venv_bin = Path(sys.executable).parent
        self.base_env = image_environment() | {
            "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "LANG": "C.UTF-8",
        }
        self.processes = Processes(tmp_path, self.base_env)
        self.replicas: dict[str, list[str]] = {}

    def environment(self, service, label: str) -> dict[str, str]:
        stand_ins = self.stand_ins | self.service_stand_ins.get(service.name, {})
        env = {key: stand_ins.get(key, value) for key, value in service.environment(self.dotenv).items()}
        env["PROMETHEUS_MULTIPROC_DIR"] = str(self.tmp_path / "metrics" / label)  # per container
        leftover = {key: value for key, value in env.items() if key not in stand_ins and _STAND_IN_HOST.search(value)}
        assert not leftover, f"{service.name}: no stand-in for {leftover}"
        var_source = service.var_volume_source()
        env["SCHEDULER_VAR_DIR"] = str(self.tmp_path / "host" / var_source if var_source else self.image_var)
        return env

    def build_image(self):
        for step in image_project_build_steps():
            env = self.base_env | {"SCHEDULER_VAR_DIR": str(self.image_var)}
            done = subprocess.run(["sh", "-c", step], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, f"image build step {step!r} failed:\n{done.stderr[-3000:]}"

    def run_one_shot(self, service):
        env = self.base_env | self.environment(service, service.name)
        done = subprocess.run(
            service.local_argv(self.ports), cwd=ROOT, env=env, capture_output=True, text=True, timeout=ONE_SHOT_TIMEOUT
        )
        assert done.returncode == 0, f"{service.name} exited {done.returncode}:\n{done.stderr[-3000:]}"
        return done.stdout

    def start(self, service):
        for replica in range(1, service.replicas + 1):
            label = f"{service.name}-{replica}"
            self.processes.start(label, service.local_argv(self.ports), **self.environment(service, label))
            self.replicas.setdefault(service.name, []).append(label)

    def exited(self) -> dict[str, int]:
        return {label: child.returncode for label, child in self.processes.children.items() if child.poll() is not None}

    def logs(self) -> str:
        return "\n".join(f"----- {label} -----\n{self.processes.log(label)[-2000:]}" for label in self.processes.children)


def http(url: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with _NO_PROXY.open(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return 0, b""


@pytest.fixture
def pgbouncer(tmp_path, fresh_database_url):
    with pgbouncer_in_front_of(fresh_database_url, tmp_path / "pgbouncer.log", pool_size=5) as bouncer:
        yield bouncer


@pytest.mark.slow
def test_compose__every_service_starts_and_the_demo_report_reaches_the_mailbox(
    tmp_path, fresh_database_url, pgbouncer, redis_url, moto_server, mailbox
):
    mail_dir, smtp_port = mailbox
    public_s3 = moto_server.replace("127.0.0.1", "localhost")
    stand_ins = {
        # The scheduler's processes go through PgBouncer, as in compose; only migrate connects directly.
        "DATABASE_URL": pgbouncer.url(fresh_database_url),
        "DATABASE_POOLER": "pgbouncer",
        "REDIS_URL": redis_url,
        "S3_ENDPOINT_URL": moto_server,
        "S3_PUBLIC_ENDPOINT_URL": public_s3,
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp_port),
    }
    direct = {"DATABASE_URL": fresh_database_url, "DATABASE_POOLER": ""}
    run = ComposeRun(tmp_path, stand_ins, {"migrate": direct})
    run.build_image()
    try:
        for service in start_order(compose_services()):
            if service.one_shot:
                run.run_one_shot(service)
            else:
                run.start(service)
        _check_the_running_system(run, mail_dir, public_s3)
    except BaseException:
        print(run.logs())
        raise
    finally:
        run.processes.stop_all()


def _check_the_running_system(run: ComposeRun, mail_dir: Path, public_s3: str) -> None:
    base = f"http://127.0.0.1:{run.ports[8000]}"
    token = (run.tmp_path / "host" / "var" / "demo-token").read_text().strip()
    wait_until(lambda: http(f"{base}/api/v1/schedules", token)[0] == 200, timeout=60, message="the web service")
    assert http(f"{base}/static/admin/css/base.css")[0] == 200, "static files were not collected into the image"
    assert http(f"{base}/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")[0] == 200
    assert http(f"{base}/metrics")[0] == 401
    assert http(f"{base}/metrics", run.dotenv["METRICS_TOKEN"])[0] == 200

    # The bootstrap's first run goes relay → Redis → worker-short → S3, then effects → SMTP.
    schedule = json.loads(http(f"{base}/api/v1/schedules", token)[1])["results"][0]
    runs_url = f"{base}/api/v1/schedules/{schedule['scheduleId']}/runs"

    def succeeded_run():
        return next((r for r in json.loads(http(runs_url, token)[1])["results"] if r["state"] == "succeeded"), None)

    demo_run = wait_until(succeeded_run, timeout=120, message="the demo run to succeed")
    wait_until(lambda: list(mail_dir.glob("*.eml")), timeout=60, message="the report mail")
    status, body = http(f"{base}/api/v1/runs/{demo_run['runId']}/result", token)
    link = json.loads(body)
    assert status == 200 and link["url"].startswith(public_s3 + "/"), link
    status, data = http(link["url"])
    assert status == 200 and "sha256:" + hashlib.sha256(data).hexdigest() == link["checksum"]

    time.sleep(2)  # long-running services stay up, not only start
    assert run.exited() == {}, f"services exited: {run.exited()}"
    assert set(run.replicas) == {s.name for s in compose_services().values() if s.built_here and not s.one_shot}


SECRETS = {"SECRET_KEY", "POSTGRES_PASSWORD", "MINIO_ROOT_PASSWORD", "METRICS_TOKEN"}


def test_compose__refuses_to_start_without_the_secrets_of_dotenv():
    services = compose_services()
    for name in ("web", "postgres", "minio"):
        with pytest.raises(MissingVariable):
            services[name].environment({})
    example = read_dotenv(DOTENV_EXAMPLE)
    assert SECRETS | {"MINIO_ROOT_USER"} <= set(example)
    for secret in SECRETS:  # each one alone missing stops every scheduler service
        with pytest.raises(MissingVariable, match=secret):
            services["web"].environment({key: value for key, value in example.items() if key != secret} | {secret: ""})
    assert "change-me" not in str(services["web"].spec) and "minioadmin" not in str(services["minio"].spec)


def test_dotenv_example__every_secret_is_a_placeholder_the_processes_refuse():
    # kernel.startup refuses these values; tests/test_secret_key.py starts the web
    # process with .env.example copied unchanged.
    example = read_dotenv(DOTENV_EXAMPLE)
    assert {key for key in SECRETS if example[key].startswith(PLACEHOLDER_PREFIX)} == SECRETS


def test_compose__only_the_web_port_is_published_beyond_this_host():
    published = {
        name: port for name, service in compose_services().items() for port in service.spec.get("ports", [])
        if not str(port).startswith("127.0.0.1:")
    }
    assert published == {"web": "8000:8000"}
