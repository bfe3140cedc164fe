"""A fresh clone's documentation points only at files the clone has, and cites nothing a
reader of the clone cannot find (a numbered section of a design document it does not have,
an issue number of a tracker it cannot see)."""

import re

import pytest

from tests.deploy.compose import ROOT

DOCUMENTS = ["README.md", "BENCHMARKS.md", *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").glob("*.md"))]
MARKDOWN_LINK = re.compile(r"\]\(([^)#]+)(?:#[^)]*)?\)")
UNFINDABLE = re.compile(r"\b(?:section|issue) \d+", re.IGNORECASE)
# README's layout block: the `docs/` line and its continuation lines.
README_LAYOUT = re.compile(r"^docs/ +(.*(?:\n {10,}.*)*)", re.MULTILINE)


def project_python_files():
    yield from ROOT.glob("*.py")
    for top in sorted(ROOT.iterdir()):
        if top.is_dir() and not top.name.startswith(".") and top.name not in {"var", "build"}:
            yield from top.rglob("*.py")


@pytest.mark.parametrize("document", DOCUMENTS)
def test_docs__relative_links_resolve_inside_the_repository(document):
    path = ROOT / document
    text = path.read_text()
    assert "../shared" not in text
    for target in MARKDOWN_LINK.findall(text):
        if not re.match(r"[a-z]+:", target):
            resolved = (path.parent / target).resolve()
            assert resolved.is_relative_to(ROOT) and resolved.exists(), (document, target)


def test_docs_and_code__cite_no_section_or_issue_number():
    sources = [ROOT / document for document in DOCUMENTS] + list(project_python_files())
    cited = [f"{path.relative_to(ROOT)}: {match.group(0)}" for path in sources
             for match in UNFINDABLE.finditer(path.read_text())]
    assert cited == []


def test_readme_layout__lists_every_file_under_docs():
    layout = README_LAYOUT.search((ROOT / "README.md").read_text()).group(1)
    assert sorted(re.findall(r"([\w-]+\.md)", layout)) == sorted(path.name for path in (ROOT / "docs").glob("*.md"))
