"""The import graph points downward only (STYLE.md): the kernel (kernel/) at the bottom, then
object storage, schedules (their definitions and rules), the authority (runs, with the records
it writes: runs, attempts, objects, effect intents), the schedule services, effects and
workers; the interface on top (scheduler_project/: settings, urls, the Celery app, the HTTP
edge, the admin, the deployment's commands; console/). Every module of a layer counts, its
models, views, commands and migrations included: an arrow back up fails this test. Only
Django's and Celery's wiring may be read from below: the settings, the Celery app, and an
app's urls.py (its routes name views of the HTTP edge)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("kernel", "objectstore", "schedules", "runs", "schedule_services", "effects", "workers")
INTERFACE = ("scheduler_project", "console")  # on top: may import any layer
WIRING_MODULES = ("scheduler_project.settings", "scheduler_project.celery")  # configuration anyone may read
WIRING_FILES = {"urls.py"}  # Django's routes: a layer's urls.py names views of the HTTP edge


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def rank(module: str) -> int | None:
    """The module's height: its layer's index, the interface above every layer; None for
    third-party code."""
    top = module.split(".")[0]
    if top in LAYERS:
        return LAYERS.index(top)
    return len(LAYERS) if top in INTERFACE else None


def imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []


def layer_modules():
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name not in WIRING_FILES:
                yield path


def upward_imports() -> list[str]:
    found = []
    for path in layer_modules():
        own = rank(module_name(path))
        for line, target, names in imports(path):
            for full in [f"{target}.{name}" for name in names] or [target]:
                theirs = rank(full)
                if theirs is not None and theirs > own and not full.startswith(WIRING_MODULES):
                    found.append(f"{path.relative_to(ROOT)}:{line} imports {full}")
    return found


def test_import_graph__no_arrow_back_up():
    assert upward_imports() == []


def test_no_package_imports_one_that_imports_it_back():
    """What the order above implies, said as the cycle it forbids: between two packages
    (wiring aside), imports go one way only."""
    edges = {}
    for package in (*LAYERS, *INTERFACE):
        for path in (ROOT / package).rglob("*.py"):
            if path.name in WIRING_FILES or module_name(path).startswith(WIRING_MODULES):
                continue
            for _, target, _ in imports(path):
                other = target.split(".")[0]
                if other != package and other in (*LAYERS, *INTERFACE) and not target.startswith(WIRING_MODULES):
                    edges.setdefault(package, set()).add(other)
    both_ways = sorted(f"{a} <-> {b}" for a in edges for b in edges[a] if a < b and a in edges.get(b, ()))
    assert both_ways == []


def test_layering_rule__detects_an_arrow_back_up(tmp_path, monkeypatch):
    """The check itself: the authority importing from workers, from effects' models, from
    the HTTP edge or the console is reported, the settings are not."""
    fake = tmp_path / "runs"
    fake.mkdir()
    (fake / "bad.py").write_text(
        "from workers.runtime import execute_claimed\nfrom effects.models import IncidentNotice\nimport console.views\n"
        "from scheduler_project.http.json import read_body\nfrom scheduler_project.settings import DEBUG\n"
    )
    for package in LAYERS:
        (tmp_path / package).mkdir(exist_ok=True)
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert upward_imports() == [
        "runs/bad.py:1 imports workers.runtime.execute_claimed", "runs/bad.py:2 imports effects.models.IncidentNotice",
        "runs/bad.py:3 imports console.views", "runs/bad.py:4 imports scheduler_project.http.json.read_body",
    ]
