"""A step of `make test` that is not pytest (the docs build, the artifacts' check) is one JUnit case."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, *command: str) -> tuple[int, str]:
    report = tmp_path / "step.xml"
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "junit_step.py"), str(report), "docs", "--", *command],
        capture_output=True,
        text=True,
    )
    return done.returncode, report.read_text()


def test_a_passing_step_is_one_passed_case_and_a_failing_one_a_failure_with_its_output(
    tmp_path: Path,
) -> None:
    code, xml = _run(tmp_path, "true")
    assert code == 0 and 'tests="1"' in xml and 'failures="0"' in xml
    code, xml = _run(tmp_path, "sh", "-c", "echo broken link in aks.md; exit 3")
    assert code == 3 and 'failures="1"' in xml and "broken link in aks.md" in xml
    summary = subprocess.run(
        [sys.executable, str(REPO / "tools" / "test_summary.py"), str(tmp_path / "step.xml")],
        capture_output=True,
        text=True,
    )
    assert summary.returncode == 1 and "0 passed, 1 failed" in summary.stdout
