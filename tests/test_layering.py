"""The import graph points downward only (STYLE.md): the kernel (kernel/) at the bottom,
then object storage, schedules (their definitions and rules), the authority (runs, with the
records it writes: runs, attempts, objects, effect intents), the schedule services, effects and
workers. An arrow back up fails this test, models included: a package's models are its own.
What Django requires inside an app but is its interface (views, admin, management commands,
migrations, apps.py, Celery tasks) sits on top with HTTP, the console and scheduler_project/,
and may import anything."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("kernel", "objectstore", "schedules", "runs", "schedule_services", "effects", "workers")
INTERFACE_FILES = {"views.py", "object_views.py", "admin.py", "admin_forms.py", "admin_calendars.py", "urls.py",
                   "api_urls.py", "apps.py", "tasks.py", "settings.py", "celery.py", "wsgi.py"}
INTERFACE_DIRS = {"http", "commands", "migrations"}
WIRING = ("scheduler_project.settings", "scheduler_project.celery")  # configuration anyone may read
INTERFACE_PACKAGES = ("console",)  # interface apps on top: every module in them is interface


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str | None:
    """The module's layer; None for the interface on top (and for third-party code)."""
    top = module.split(".")[0]
    return top if top in LAYERS else None


def is_interface(path: Path) -> bool:
    relative = path.relative_to(ROOT)
    return path.name in INTERFACE_FILES or bool(INTERFACE_DIRS & set(relative.parts))


def imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []


def first_party_modules():
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            if not is_interface(path):
                yield path


def upward_imports() -> list[str]:
    found = []
    for path in first_party_modules():
        own = LAYERS.index(layer(module_name(path)))
        for line, target, names in imports(path):
            targets = [f"{target}.{name}" for name in names] or [target]
            for full in targets:
                if full.startswith(WIRING):
                    continue
                if full.split(".")[0] not in ("scheduler_project", *LAYERS, *INTERFACE_PACKAGES):
                    continue  # third party
                theirs = layer(full)
                if theirs is None or LAYERS.index(theirs) > own:
                    found.append(f"{path.relative_to(ROOT)}:{line} imports {full}")
    return found


def test_import_graph__no_arrow_back_up():
    assert upward_imports() == []


def test_layering_rule__detects_an_arrow_back_up(tmp_path, monkeypatch):
    """The check itself: the authority importing from workers is reported."""
    fake = tmp_path / "runs"
    fake.mkdir()
    (fake / "bad.py").write_text(
        "from workers.runtime import execute_claimed\nfrom effects.models import IncidentNotice\nimport console.views\n"
    )
    for package in LAYERS:
        (tmp_path / package).mkdir(exist_ok=True)
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert upward_imports() == [
        "runs/bad.py:1 imports workers.runtime.execute_claimed", "runs/bad.py:2 imports effects.models.IncidentNotice",
        "runs/bad.py:3 imports console.views",
    ]
