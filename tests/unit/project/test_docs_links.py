"""Every relative link in the README, CONTRIBUTING.md and docs/*.md leads somewhere: the
file or directory exists, and a ``#anchor`` names a heading of the page it points into
(GitHub's slugs: lowercase, punctuation dropped, spaces as hyphens, ``-1``, ``-2`` for
repeated headings). Text moves between these pages; a link left pointing at the old place
fails here instead of on a reader. Links with a scheme (https:, mailto:) are not
followed."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^ {0,3}(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_LINK = re.compile(
    r"(?<!\\)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)"
)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
HTML_ANCHOR = re.compile(r"""<a\s+(?:name|id)=["']([^"']+)["']""")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks and indented code blocks."""
    lines, fenced, previous_blank = [], False, True
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        indented_code = previous_blank and line.startswith("    ")
        if not fenced and not indented_code:
            lines.append((number, line))
        # An indented block goes on until a non-indented line.
        if indented_code:
            previous_blank = True
        else:
            previous_blank = line.strip() == ""
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    found = set()
    for _, line in _prose_lines(page.read_text()):
        found.update(HTML_ANCHOR.findall(line))
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every inline link outside code."""
    found = []
    for number, line in _prose_lines(text):
        prose = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
        found.extend((number, m.group(2)) for m in INLINE_LINK.finditer(prose))
    return found


def broken(page: Path, target: str) -> str | None:
    """Why a link does not resolve, or None."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
        return None  # https:, mailto:, ...
    path, _, anchor = target.partition("#")
    destination = (page.parent / path).resolve() if path else page
    if not destination.exists():
        return "no such file or directory"
    if anchor:
        if destination.suffix != ".md":
            return f"an anchor into {destination.name}, which is not a markdown page"
        if anchor not in anchors(destination):
            return f"{destination.relative_to(ROOT)} has no heading #{anchor}"
    return None


def test_the_slugs_are_githubs():
    assert slug("1. Server and account") == "1-server-and-account"
    assert slug("Tables joining and leaving") == "tables-joining-and-leaving"
    assert slug("Against MySQL 8.0 and 8.4 in Docker") == "against-mysql-80-and-84-in-docker"
    assert slug("`cdc-mysql check`, by example") == "cdc-mysql-check-by-example"
    assert slug("Coming from Flink CDC, Debezium or Spark's Kafka source") == (
        "coming-from-flink-cdc-debezium-or-sparks-kafka-source"
    )


def test_links_in_code_are_not_links():
    text = "[a](x.md) and `[b](y.md)`\n\n    [c](z.md)\n\n```\n[d](w.md)\n```\n[e](v.md#h)\n"
    assert links(text) == [(1, "x.md"), (8, "v.md#h")]


def test_every_page_has_links_to_check():
    assert ROOT / "README.md" in PAGES and ROOT / "CONTRIBUTING.md" in PAGES
    assert sum(len(links(page.read_text())) for page in PAGES) > 50


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_and_anchor_resolves(page):
    problems = [
        f"{page.relative_to(ROOT)}:{number}: ({target}) {why}"
        for number, target in links(page.read_text())
        if (why := broken(page, target))
    ]
    assert not problems, "\n".join(problems)
