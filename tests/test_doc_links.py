"""Every relative link of the Markdown docs and every `docs/…` path the docs and pyproject.toml name exists."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
NAMED = re.compile(r"(?<![\w/.])(docs/[\w./-]*[\w/])(?![\w./*-])")  # not a glob such as docs/weights/x*.json


def _missing_links(page: Path) -> list[str]:
    missing = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:, data:
            continue
        if not (page.parent / target).exists():
            missing.append(target)
    return missing


def test_relative_links_resolve() -> None:
    broken = {str(page.relative_to(ROOT)): _missing_links(page) for page in DOCS}
    assert {page: links for page, links in broken.items() if links} == {}


def test_docs_paths_named_exist() -> None:
    sources = [*DOCS, ROOT / "pyproject.toml"]
    named = {
        (str(source.relative_to(ROOT)), path.rstrip("."))
        for source in sources
        for path in NAMED.findall(source.read_text(encoding="utf-8"))
    }
    missing = sorted((source, path) for source, path in named if not (ROOT / path).exists() and "*" not in path)
    assert missing == []
