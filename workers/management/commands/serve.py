"""`make run`: the whole service in one command, each part a supervised child process."""

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from kernel.startup import serve_secrets_ensure
from workers.jobs.catalog import schedules_without_job_type

RESTART_BACKOFF_MAX = 30.0
# Children get this long to exit after SIGTERM; whatever is left of their process groups is
# then killed. Below gunicorn's --graceful-timeout plus a margin, well inside 10 s.
STOP_GRACE_SECONDS = 7.0


def _die_with_parent():
    """Linux: the child gets SIGTERM if this supervisor dies, so nothing is left running."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def service_commands(*, host: str, port: int, redis: bool) -> dict[str, list[str]]:
    manage = [sys.executable, "manage.py"]
    services = {
        # Idle keep-alive connections would otherwise hold a stopping worker for 30 s. The control
        # socket is this installation's: gunicorn's default, one per user, is taken over by each
        # new instance on the host and deleted when any of them stops.
        "web": [sys.executable, "-m", "gunicorn", "scheduler_project.wsgi", "--bind", f"{host}:{port}",
                "--workers", "2", "--threads", "4", "--graceful-timeout", "5", "--access-logfile", "-",
                "--control-socket", str(settings.VAR_DIR / "gunicorn.ctl")],
        "scan": manage + ["scan"],
        "sweep": manage + ["sweep"],
        "effects": manage + ["effects"],
        "health": manage + ["health"],
        "cleanup": manage + ["cleanup"],
    }
    if redis:
        celery = [sys.executable, "-m", "celery", "-A", "scheduler_project"]
        services |= {
            "relay": manage + ["relay"],
            "worker-short": celery + ["worker", "-Q", "short,housekeeping", "-c", "4", "-n", "short@%h"],
            "worker-long": celery + ["worker", "-Q", "long,memory", "-c", "1", "-n", "long@%h"],
            "beat": celery + ["beat", "-S", "django_celery_beat.schedulers:DatabaseScheduler"],
        }
    else:
        services["dispatch"] = manage + ["dispatch"]
    return services


def _signal_group(pgid: int, sig: int) -> bool:
    """Signal a whole process group; False once no process of it is left."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


class Children:
    """Named child processes, each leading its own process group: a stop reaches the whole tree
    (gunicorn's and Celery's workers too), and the terminal's Ctrl-C reaches only the supervisor."""

    def __init__(self, commands: dict[str, list[str]], env: dict[str, str]):
        self.commands = commands
        self.env = env
        self.running: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> None:
        if name in self.running:
            # A leader that died may have left its own children behind, holding ports.
            _signal_group(self.running[name].pid, signal.SIGKILL)
        self.running[name] = subprocess.Popen(
            self.commands[name], env=self.env, cwd=settings.BASE_DIR,
            start_new_session=True, preexec_fn=_die_with_parent,
        )

    def exited(self) -> list[str]:
        return [name for name, child in self.running.items() if child.poll() is not None]

    def stop(self, grace: float) -> list[str]:
        """SIGTERM every group, wait up to `grace` for all of them to empty, SIGKILL the rest.

        Returns the names whose groups had to be killed."""
        for child in self.running.values():
            _signal_group(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while self._groups_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        killed = [name for name, child in self.running.items() if _signal_group(child.pid, signal.SIGKILL)]
        for child in self.running.values():
            child.wait()
        return killed

    def _groups_alive(self) -> list[str]:
        for child in self.running.values():
            child.poll()  # reap the leader, or its zombie keeps the group alive
        return [name for name, child in self.running.items() if _signal_group(child.pid, 0)]

def _public_address(host: str, port: int) -> dict[str, str]:
    """Unless configured, links point at this server and it answers to its own name and the
    loopback names (settings would otherwise serve only the link's host)."""
    if "PUBLIC_BASE_URL" in os.environ:
        return {}
    shown = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    shown = f"[{shown}]" if ":" in shown else shown
    hosts = os.environ.get("ALLOWED_HOSTS") or ",".join(dict.fromkeys([shown, "127.0.0.1", "localhost", "[::1]"]))
    return {"PUBLIC_BASE_URL": f"http://{shown}:{port}", "ALLOWED_HOSTS": hosts}


def _python_command() -> str:
    """This interpreter as typed in the project directory: `.venv/bin/python` under `make run`."""
    executable = Path(sys.executable)
    return str(executable.relative_to(settings.BASE_DIR) if executable.is_relative_to(settings.BASE_DIR) else executable)


class Command(BaseCommand):
    help = "Run API, admin, scanner, sweeper and workers (embedded pool, or relay + Celery with REDIS_URL)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--check", action="store_true",
                            help="only check what starting needs (the secrets), start nothing; `make run` does "
                                 "it before it migrates, so a refused start writes nothing")

    def execute(self, *args, **options):
        # Before Django's system checks, some of which read the database: a refused start is
        # one line saying what to set, not warnings and a traceback.
        try:
            serve_secrets_ensure()
        except ImproperlyConfigured as refused:
            raise CommandError(str(refused)) from None
        return super().execute(*args, **options | ({"skip_checks": True} if options["check"] else {}))

    def handle(self, *args, host, port, check, **options):
        if check:
            return
        self._warn_schedules_without_job_type()
        metrics_dir = settings.VAR_DIR / "metrics"
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir(parents=True)
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir), **_public_address(host, port)}
        if settings.REDIS_URL:
            call_command("install_housekeeping")
        children = Children(service_commands(host=host, port=port, redis=bool(settings.REDIS_URL)), env)
        stop_requested = []
        signal.signal(signal.SIGTERM, lambda *_: stop_requested.append(True))
        signal.signal(signal.SIGINT, lambda *_: stop_requested.append(True))
        for name in children.commands:
            children.start(name)
        self.stdout.write(f"serving on http://{host}:{port}/ with {', '.join(children.commands)}; Ctrl-C stops")
        self.stdout.write(f"console on http://{host}:{port}/console/ for staff users; create one with "
                          f"`{_python_command()} manage.py createsuperuser`")
        self._supervise(children, stop_requested)
        self.stdout.write(f"stopping {len(children.running)} services")
        killed = children.stop(STOP_GRACE_SECONDS)
        if killed:
            self.stdout.write(f"killed what was left of {', '.join(killed)} after {STOP_GRACE_SECONDS:.0f}s")
        self.stdout.write("stopped every process this command started")

    def _warn_schedules_without_job_type(self) -> None:
        """Say at start, not only in a metric, which schedules lost their job type (a start
        without the SCHEDULER_JOB_MODULES of an earlier one): their runs wait until it is back."""
        count, described = schedules_without_job_type()
        if not count:
            return
        self.stderr.write(
            f"WARNING: {count} schedule(s) have a job type that is no longer declared; their runs wait "
            f"(pendingReason job_type_unavailable) until it is. Declare it again (SCHEDULER_JOB_MODULES="
            f"{os.environ.get('SCHEDULER_JOB_MODULES', '')!r} now) or delete the schedules:"
        )
        for line in described:
            self.stderr.write(f"  {line}")
        if count > len(described):
            self.stderr.write(f"  ... and {count - len(described)} more")

    def _supervise(self, children: Children, stop_requested: list) -> None:
        """Restart children that exit, with a growing backoff, until a stop is requested."""
        backoff = {name: 1.0 for name in children.commands}
        restart_at: dict[str, float] = {}
        while not stop_requested:
            time.sleep(0.2)
            now = time.monotonic()
            for name in children.exited():
                if name not in restart_at:
                    code = children.running[name].returncode
                    self.stderr.write(f"{name} exited with {code}; restarting in {backoff[name]:.0f}s")
                    restart_at[name] = now + backoff[name]
                    backoff[name] = min(RESTART_BACKOFF_MAX, backoff[name] * 2)
                elif now >= restart_at[name]:
                    del restart_at[name]
                    children.start(name)
