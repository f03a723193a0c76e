"""Every relative link and section reference in README.md and docs/*.md points at something that exists.

A page read on the repository host or on the site must not send a reader to a file that moved or a section
that was renamed: a relative link's file must exist, its ``#anchor`` must be a heading of the target
(Python-Markdown's toc slugs, as mkdocs builds them, or an ``{#id}`` of attr_list), and a prose reference
such as ``(README, "Compatibility")`` must name a README section that exists.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK = re.compile(r"!?\[(?:[^\]\n]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(?P<target>\S+)", re.M)
HEADING = re.compile(r"^(#{1,6})\s+(?P<text>.+?)\s*#*\s*$")
ATTR_ID = re.compile(r"\{[^}]*#(?P<id>[\w-]+)[^}]*\}\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
README_REF = re.compile(r"README(?:'s)?,?\s+\"(?P<section>[^\"]+)\"")
README_NAMES = re.compile(r"README (?:also )?names \*(?P<term>[^*]+)\*")


def _prose_lines(text: str, keep_code: bool = False) -> list[tuple[int, str]]:
    """(line number, line less its inline code unless ``keep_code``) outside fenced code blocks."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, line if keep_code else INLINE_CODE.sub("", line)))
    return out


def slugify(heading: str) -> str:
    """Python-Markdown's toc slugify (mkdocs' default): markup dropped, ASCII, lower case, dashes."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


@cache
def anchors(path: Path) -> frozenset[str]:
    """The ids mkdocs gives the page's headings (a repeated slug gets ``_1``, ``_2``, ...)."""
    seen: dict[str, int] = {}
    ids: set[str] = set()
    for _, line in _prose_lines(path.read_text(), keep_code=True):
        found = HEADING.match(line)
        if not found:
            continue
        text = found.group("text")
        if attr := ATTR_ID.search(text):
            ids.add(attr.group("id"))
            continue
        slug = slugify(text)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        ids.add(slug if count == 0 else f"{slug}_{count}")
    return frozenset(ids)


def readme_sections() -> set[str]:
    return {
        m.group("text").replace("`", "")
        for _, line in _prose_lines((REPO / "README.md").read_text(), keep_code=True)
        if (m := HEADING.match(line))
    }


def broken_links(page: Path) -> list[str]:
    text = page.read_text()
    targets = [(n, m.group("target")) for n, line in _prose_lines(text) for m in LINK.finditer(line)]
    targets += [(text.count("\n", 0, m.start()) + 1, m.group("target")) for m in REF_DEF.finditer(text)]
    problems = []
    for number, target in targets:
        if SCHEME.match(target) or target.startswith("/"):
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        where = f"{page.relative_to(REPO)}:{number}: {target}"
        if not dest.exists():
            problems.append(
                f"{where}: no file {dest.relative_to(REPO) if dest.is_relative_to(REPO) else dest}"
            )
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where}: no heading with id #{anchor} in {dest.relative_to(REPO)}")
    return problems


def broken_readme_refs(page: Path) -> list[str]:
    sections = readme_sections()
    text = page.read_text().replace("\n", " ")
    return [
        f'{page.relative_to(REPO)}: (README, "{m.group("section")}"): no such README section; link the page'
        for m in README_REF.finditer(text)
        if m.group("section") not in sections
    ] + [
        f"{page.relative_to(REPO)}: the README names no {m.group('term')!r} any more"
        for m in README_NAMES.finditer(text)
        if m.group("term") not in (REPO / "README.md").read_text()
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_and_anchors_resolve(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_readme_section_references_exist(page: Path) -> None:
    assert broken_readme_refs(page) == []


def test_the_checker_sees_a_broken_anchor_and_a_missing_section(tmp_path: Path) -> None:
    assert slugify("The local cluster and `make demo`") == "the-local-cluster-and-make-demo"
    assert slugify("10. Entra ID-only clusters") == "10-entra-id-only-clusters"
    docs = REPO / "docs"
    page = docs / "quick-start.md"
    assert "operator.md#rbac" in page.read_text()
    assert "rbac" in anchors(docs / "operator.md")
    assert "no-such-heading" not in anchors(docs / "operator.md")
