"""CHANGELOG.md (Keep a Changelog) has a section for the version being made: ``[Unreleased]`` or one for
``__version__``; and each upgrade note says what to do and which commits made the change."""

from __future__ import annotations

import re
from pathlib import Path

import airflow_kueue_provider

CHANGELOG = (Path(__file__).resolve().parents[2] / "CHANGELOG.md").read_text()
HEADING = re.compile(r"^## \[(?P<name>[^\]]+)\]", flags=re.MULTILINE)


def section(name: str) -> str:
    starts = {m["name"]: m.start() for m in HEADING.finditer(CHANGELOG)}
    start = starts[name]
    later = [s for s in starts.values() if s > start]
    return CHANGELOG[start : min(later, default=len(CHANGELOG))]


def test_it_has_a_section_for_the_current_version_or_unreleased() -> None:
    version = airflow_kueue_provider.__version__
    names = [m["name"] for m in HEADING.finditer(CHANGELOG)]
    assert "Unreleased" in names or version in names, (
        f"CHANGELOG.md has sections {names}: add '## [Unreleased]' or '## [{version}]'"
    )


def test_each_upgrade_note_says_what_to_do_and_cites_its_commits() -> None:
    unreleased = section("Unreleased") if "## [Unreleased]" in CHANGELOG else ""
    notes = unreleased.split("### Upgrade notes", 1)[1].split("\n### ", 1)[0] if unreleased else ""
    bullets = re.split(r"\n(?=- )", notes.strip())[1:]
    assert bullets, "the Unreleased section has no upgrade notes"
    for bullet in bullets:
        title = bullet.splitlines()[0]
        assert "**Do:**" in bullet, f"{title}: say what the user does"
        assert re.search(r"\((?:[0-9a-f]{7}(?:, )?)+\)\s*$", bullet.replace("\n  ", " ")), (
            f"{title}: end with the commits, e.g. (0ff14a1)"
        )
