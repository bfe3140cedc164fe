"""A fresh clone's documentation points only at files the clone has."""

import re

import pytest

from tests.deploy.compose import ROOT

MARKDOWN_LINK = re.compile(r"\]\(([^)#]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("document", ["README.md", "docs/api.md", "docs/design.md"])
def test_docs__relative_links_resolve_inside_the_repository(document):
    path = ROOT / document
    text = path.read_text()
    assert "../shared" not in text
    for target in MARKDOWN_LINK.findall(text):
        if not re.match(r"[a-z]+:", target):
            resolved = (path.parent / target).resolve()
            assert resolved.is_relative_to(ROOT) and resolved.exists(), (document, target)
