"""Every relative link in README.md and docs/*.md reaches a file, and its #anchor a heading.

Docs get reorganised (docs/performance.md went from a notebook to a reference); a link
into a heading that no longer exists renders fine and silently lands at the top of the
page. Anchors are GitHub's: the heading's text, lower-cased, punctuation dropped, spaces
as hyphens, a repeated slug numbered -1, -2.
"""

from __future__ import annotations

import os
import re
from itertools import pairwise
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def slug(text: str) -> str:
    """GitHub's anchor for a heading whose rendered text is ``text``."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _tokens(path: Path):
    return MarkdownIt("commonmark").enable("table").parse(path.read_text(encoding="utf-8"))


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of one markdown file."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for opening, inline in pairwise(_tokens(path)):
        if opening.type != "heading_open":
            continue
        text = "".join(
            child.content
            for child in inline.children or []
            if child.type in ("text", "code_inline")
        )
        base = slug(text)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    """Every link and image target of one markdown file (code blocks and spans excluded)."""
    targets = []
    for token in _tokens(path):
        for child in token.children or []:
            if child.type == "link_open":
                targets.append(child.attrs["href"])
            elif child.type == "image":
                targets.append(child.attrs["src"])
    return targets


def broken(page: Path) -> list[str]:
    """The relative links of ``page`` whose file or heading does not exist."""
    problems = []
    for target in links(page):
        parts = urlsplit(target)
        if parts.scheme or parts.netloc or target.startswith("mailto:"):
            continue
        dest = (page.parent / unquote(parts.path)).resolve() if parts.path else page
        if not dest.exists():
            problems.append(f"{target}: no file {os.path.relpath(dest, page.parent)}")
        elif (
            parts.fragment and dest.suffix == ".md" and unquote(parts.fragment) not in anchors(dest)
        ):
            problems.append(f"{target}: no heading #{parts.fragment} in {dest.name}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    assert broken(page) == []


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        # Anchors GitHub gave headings these docs have linked to.
        (
            "Credential content: the cost of the scan (issue 25)",
            "credential-content-the-cost-of-the-scan-issue-25",
        ),
        ("orch ui (issue 31)", "orch-ui-issue-31"),
        (
            "4. Credential content is withheld, whatever the file is called",
            "4-credential-content-is-withheld-whatever-the-file-is-called",
        ),
        (
            "Content scanning and the daemon client's checks",
            "content-scanning-and-the-daemon-clients-checks",
        ),
        (
            "Local server: why four slots add little on this CPU",
            "local-server-why-four-slots-add-little-on-this-cpu",
        ),
    ],
)
def test_slug_is_githubs(heading, anchor):
    assert slug(heading) == anchor


def test_a_link_to_a_missing_heading_is_caught(tmp_path):
    (tmp_path / "a.md").write_text("# Title\n\n## The ledger\n\n## The ledger\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#the-ledger) [second](a.md#the-ledger-1) [self](#notes)\n"
        "[gone](a.md#postgresql-ledger) [nofile](c.md)\n\n"
        "`[code](a.md#not-a-link)`\n\n## Notes\n",
        encoding="utf-8",
    )
    assert broken(page) == [
        "a.md#postgresql-ledger: no heading #postgresql-ledger in a.md",
        "c.md: no file c.md",
    ]
