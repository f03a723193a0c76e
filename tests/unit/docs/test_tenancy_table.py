"""docs/tenancy.md's attack table claims nothing without a test: every row names at least one test, and every
test, file and result it names exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TABLE_HEADER = "| attack | guard | test |"


def _rows() -> list[str]:
    text = (REPO / "docs" / "tenancy.md").read_text()
    table = text[text.index(TABLE_HEADER) :].split("\n\n", 1)[0]
    return [line for line in table.splitlines()[2:] if line.startswith("|")]


def _references(cell: str) -> list[tuple[str, str | None]]:
    """(file, test name or None) for each backticked reference; ``::name`` alone is of the previous file."""
    found: list[tuple[str, str | None]] = []
    last = ""
    for ref in re.findall(r"`([^`]+)`", cell):
        path, _, name = ref.partition("::")
        path = path or last
        found.append((path, name or None))
        last = path
    return found


def test_every_attack_names_a_test_that_exists() -> None:
    rows = _rows()
    assert len(rows) >= 20, rows
    for row in rows:
        attack, _guard, tests = (c.strip() for c in row.strip("|").split(" | ", 2))
        refs = _references(tests)
        assert refs, f"no test for: {attack}"
        assert any(p.startswith("tests/") for p, _ in refs), f"no test for: {attack}"
        for path, name in refs:
            file = REPO / path
            assert file.exists(), f"{attack}: {path} does not exist"
            if name:
                assert re.search(rf"^(async )?def {re.escape(name)}\(", file.read_text(), re.M), (
                    f"{attack}: {path} has no test {name}"
                )
