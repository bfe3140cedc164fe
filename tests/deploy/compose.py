"""docker-compose.yml and the Dockerfile read as a container runtime would, for running outside Docker.

Docker does not run on the development machines, so the deploy tests start each service's
command as a local process: the compose environment with every host the test stands in for
rewritten to 127.0.0.1, the image's ENV and build steps, the same working directory.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
README = ROOT / "README.md"
# Inside the image the repository is at WORKDIR; its var/ is settings.VAR_DIR.
CONTAINER_VAR_DIR = "/app/var"
_PUBLISHED_BIND = re.compile(r"0\.0\.0\.0:(\d+)")
_VARIABLE = re.compile(r"\$\{(\w+)(?::([?-])([^}]*))?\}")
DOTENV_EXAMPLE = ROOT / ".env.example"


class MissingVariable(Exception):
    """A ``${VAR:?message}`` whose variable is unset or empty: compose refuses to start."""


def interpolate(value: str, dotenv: dict[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?message}``."""
    def one(match):
        name, kind, rest = match.groups()
        if dotenv.get(name):
            return dotenv[name]
        if kind == "?":
            raise MissingVariable(f"{name}: {rest}")
        return rest if kind == "-" else ""
    return _VARIABLE.sub(one, value)


def read_dotenv(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


@dataclass
class Service:
    name: str
    spec: dict
    argv: list[str] = field(init=False)

    def __post_init__(self):
        command = self.spec.get("command")
        self.argv = shlex.split(command) if isinstance(command, str) else list(command or [])

    @property
    def built_here(self) -> bool:
        return "build" in self.spec

    @property
    def one_shot(self) -> bool:
        return self.spec.get("restart") == "no"

    @property
    def replicas(self) -> int:
        return int(self.spec.get("deploy", {}).get("replicas", 1))

    def environment(self, dotenv: dict[str, str]) -> dict[str, str]:
        """The service's environment, interpolated from ``dotenv`` as compose does with .env."""
        return {key: interpolate(str(value), dotenv) for key, value in (self.spec.get("environment") or {}).items()}

    def waits_for(self, condition: str) -> set[str]:
        depends = self.spec.get("depends_on") or {}
        return {name for name, rule in depends.items() if rule.get("condition") == condition}

    def var_volume_source(self) -> str | None:
        """The host directory bind-mounted over the image's var/, if any (e.g. "./var")."""
        for volume in self.spec.get("volumes") or []:
            source, _, target = volume.partition(":")
            if target.split(":")[0] == CONTAINER_VAR_DIR:
                return source
        return None

    def local_argv(self, ports: dict[int, int]) -> list[str]:
        """The command with each published 0.0.0.0:PORT bind moved to 127.0.0.1 on the mapped port."""
        argv = []
        for arg in self.argv:
            match = _PUBLISHED_BIND.fullmatch(arg)
            argv.append(f"127.0.0.1:{ports[int(match.group(1))]}" if match else arg)
        return argv


def compose_services() -> dict[str, Service]:
    document = yaml.safe_load(COMPOSE_FILE.read_text())
    return {name: Service(name, spec) for name, spec in document["services"].items()}


def start_order(services: dict[str, Service]) -> list[Service]:
    """Scheduler services, each after the one-shot services it waits to complete."""
    ordered, placed = [], set()
    pending = [s for s in services.values() if s.built_here]
    while pending:
        ready = [s for s in pending if s.waits_for("service_completed_successfully") <= placed]
        assert ready, f"circular depends_on among {[s.name for s in pending]}"
        for service in ready:
            ordered.append(service)
            placed.add(service.name)
            pending.remove(service)
    return ordered


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def image_environment() -> dict[str, str]:
    env = {}
    for keyword, rest in dockerfile_instructions():
        if keyword == "ENV":
            env.update(pair.split("=", 1) for pair in shlex.split(rest))
    return env


def image_project_build_steps() -> list[str]:
    """The build's RUN steps that run project code (dependency installs are the venv's job here)."""
    return [rest for keyword, rest in dockerfile_instructions() if keyword == "RUN" and "manage.py" in rest]


def readme_production_services() -> set[str]:
    """Service names in the first column of README's "Production shape" table."""
    section = README.read_text().split("## Production shape", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE))
