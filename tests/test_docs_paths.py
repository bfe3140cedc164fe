"""Words a reader can follow: every file the docs and the README name exists, and the README's
layout lists every package of the tree (its docs/ line: tests/deploy/test_docs_links.py). A
move that forgets its docs fails here."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A path the reader would open: a top-level folder of this tree, then a file or folder under it.
PATH = re.compile(r"`((?:[a-z_]+/)+(?:[A-Za-z0-9_.-]+\.(?:py|md|yml|yaml|json|toml|html|txt)|))`")


# The tree's own folders (not var/ and the like, which the product makes at run time).
FOLDERS = {name.split("/")[0] for name in subprocess.run(
    ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines() if "/" in name}


def named_paths(doc: Path) -> set[str]:
    return {match for match in PATH.findall(doc.read_text()) if match.split("/")[0] in FOLDERS}


def layout_block() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Layout", 1)[1]
    return section.split("```", 2)[1]


def test_every_path_the_docs_name_exists():
    missing = [f"{doc.name}: {path}" for doc in DOCS for path in sorted(named_paths(doc))
               if not (ROOT / path).exists()]
    assert missing == []


def test_readme_layout_lists_every_package():
    listed = set(re.findall(r"^([a-z_]+)/", layout_block(), flags=re.M))
    packages = {path.parent.name for path in ROOT.glob("*/__init__.py")}
    assert packages - listed == set()


def test_the_check_sees_a_missing_path(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("see `runs/authority/nothing_here.py` and `runs/models.py`")
    assert named_paths(doc) == {"runs/authority/nothing_here.py", "runs/models.py"}
    assert not (ROOT / "runs/authority/nothing_here.py").exists()
