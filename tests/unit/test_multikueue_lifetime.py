"""The MultiKueue workers stop after the session's last test that needs them
(``tests/integration/multikueue_lifetime.py``): each ended test leaves a mark, the last one says so."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.multikueue_lifetime import FIXTURE, mark_ended, marks_dir, needs_workers


@dataclass
class FakeSession:
    items: list[Any] = field(default_factory=list)


@dataclass
class FakeItem:
    nodeid: str
    fixturenames: list[str]
    session: FakeSession


def _session(*needs: bool) -> list[FakeItem]:
    session = FakeSession()
    session.items = [
        FakeItem(f"tests/t.py::test_{n}[a/b]", [FIXTURE] if need else ["cluster"], session)
        for n, need in enumerate(needs)
    ]
    return session.items


def test_only_the_last_of_the_tests_that_need_the_workers_stops_them(tmp_path: Path) -> None:
    first, other, last = _session(True, False, True)
    assert needs_workers(first) and not needs_workers(other)  # type: ignore[arg-type]
    assert mark_ended(tmp_path, last) is False  # type: ignore[arg-type]  # any order: xdist workers
    assert mark_ended(tmp_path, first) is True  # type: ignore[arg-type]
    assert len(list(marks_dir(tmp_path).iterdir())) == 2


def test_a_test_that_ends_twice_counts_once(tmp_path: Path) -> None:
    first, _ = _session(True, True)
    assert mark_ended(tmp_path, first) is False  # type: ignore[arg-type]
    assert mark_ended(tmp_path, first) is False  # type: ignore[arg-type]  # a rerun of the same test
