"""`make run`: the whole service in one command, each part a supervised child process."""

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

RESTART_BACKOFF_MAX = 30.0


def _die_with_parent():
    """Linux: the child gets SIGTERM if this supervisor dies, so nothing is left running."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def service_commands(*, host: str, port: int, redis: bool) -> dict[str, list[str]]:
    manage = [sys.executable, "manage.py"]
    services = {
        "web": [sys.executable, "-m", "gunicorn", "scheduler_project.wsgi", "--bind", f"{host}:{port}",
                "--workers", "2", "--threads", "4", "--access-logfile", "-"],
        "scan": manage + ["scan"],
        "sweep": manage + ["sweep"],
        "effects": manage + ["effects"],
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


class Command(BaseCommand):
    help = "Run API, admin, scanner, sweeper and workers (embedded pool, or relay + Celery with REDIS_URL)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))

    def handle(self, *args, host, port, **options):
        metrics_dir = settings.VAR_DIR / "metrics"
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir(parents=True)
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
        if settings.REDIS_URL:
            call_command("install_housekeeping")
        commands = service_commands(host=host, port=port, redis=bool(settings.REDIS_URL))
        children: dict[str, subprocess.Popen] = {}
        backoff = {name: 1.0 for name in commands}
        stopping = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        for name, command in commands.items():
            children[name] = subprocess.Popen(command, env=env, cwd=settings.BASE_DIR, preexec_fn=_die_with_parent)
        self.stdout.write(f"serving on http://{host}:{port}/ with {', '.join(commands)}; Ctrl-C stops")
        while not stopping:
            time.sleep(0.5)
            for name, child in list(children.items()):
                if child.poll() is not None and not stopping:
                    self.stderr.write(f"{name} exited with {child.returncode}; restarting in {backoff[name]:.0f}s")
                    time.sleep(backoff[name])
                    backoff[name] = min(RESTART_BACKOFF_MAX, backoff[name] * 2)
                    children[name] = subprocess.Popen(commands[name], env=env, cwd=settings.BASE_DIR, preexec_fn=_die_with_parent)
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for child in children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
