"""The reference pages read on the repository host, where mkdocstrings' ``:::`` directives stay raw text: each
page opens with a prose summary and a list of its main classes, one line each, before the first directive, and
every class a directive documents is on that list."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REFERENCE = Path(__file__).resolve().parents[3] / "docs" / "reference"
DIRECTIVE = re.compile(r"^::: (?P<path>[\w.]+)", re.M)
PAGES = sorted(p for p in REFERENCE.glob("*.md") if DIRECTIVE.search(p.read_text()))


def _head(text: str) -> str:
    """The page before its first directive."""
    return text[: DIRECTIVE.search(text).start()]  # type: ignore[union-attr]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_summary_and_the_main_classes_come_before_the_directives(page: Path) -> None:
    head = _head(page.read_text())
    prose = [b for b in head.split("\n\n")[1:] if b.strip() and not b.lstrip().startswith(("-", "#"))]
    assert prose and len(" ".join(prose).split()) >= 40, f"{page.name}: a prose summary first"
    assert "The main classes:" in head, f"{page.name}: a list of the main classes, one line each"
    items = re.findall(r"^- (.+)$", head, re.M)
    assert len(items) >= 3, f"{page.name}: the main classes as a list"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_documented_class_is_on_the_list(page: Path) -> None:
    text = page.read_text()
    listed = set(re.findall(r"`@?([\w.]+)`", _head(text)))
    documented = {m.group("path").rsplit(".", 1)[-1] for m in DIRECTIVE.finditer(text)}
    classes = {name for name in documented if name[0].isupper()}
    assert classes - listed == set(), f"{page.name}: name these in the list of main classes"
