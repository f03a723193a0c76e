"""Under pytest-xdist the longest bed modules start first (tests/conftest.py), from the seconds
tools/test_durations.py reads out of the last run's JUnit reports."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.conftest import REPO, longest_modules_first


def _item(path: str, name: str) -> Any:
    return SimpleNamespace(path=REPO / path, name=name)


def test_modules_run_longest_first_each_kept_whole_and_in_order() -> None:
    items = [
        _item("tests/unit/test_a.py", "a1"),
        _item("tests/integration/test_short.py", "s1"),
        _item("tests/integration/test_short.py", "s2"),
        _item("tests/integration/test_long.py", "l1"),
        _item("tests/integration/test_new.py", "n1"),
        _item("tests/integration/test_long.py", "l2"),
    ]
    seconds = {"tests/integration/test_short.py": 10, "tests/integration/test_long.py": 200}
    ordered = [i.name for i in longest_modules_first(items, seconds)]
    # test_new.py is unknown: a bed module counts as 60 s; the unit module as 0
    assert ordered == ["l1", "l2", "n1", "s1", "s2", "a1"]


def test_the_seconds_come_from_the_junit_reports_per_module(tmp_path: Path) -> None:
    report = tmp_path / "parallel.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.integration.operators.test_x" name="test_a" time="40.5"/>'
        '<testcase classname="tests.integration.operators.test_x" name="test_b" time="20"/>'
        '<testcase classname="tests.integration.test_y.TestGroup" name="test_c" time="7"/>'
        '<testcase classname="tests.unit.test_z" name="test_d" time="0.2"/>'
        "</testsuite></testsuites>"
    )
    spec = importlib.util.spec_from_file_location("test_durations", REPO / "tools" / "test_durations.py")
    assert spec and spec.loader
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.module_seconds([report]) == {
        "tests/integration/operators/test_x.py": 60,
        "tests/integration/test_y.py": 7,
    }


def test_the_committed_figures_name_modules_that_exist() -> None:
    figures = json.loads((REPO / "tests" / "module_seconds.json").read_text())
    missing = [name for name in figures if not (REPO / name).is_file()]
    assert not missing, (
        f"tests/module_seconds.json names modules that are gone (tools/test_durations.py): {missing}"
    )
