"""A trigger the previous main (8078687, before the kinds were described once) serialized loads on this code
and serializes to the same class path and kwargs: Airflow keeps a deferred task's trigger as exactly that,
and a triggerer of this version must pick it up (the bed test ``test_upgrade_while_deferred`` resumes an
older main's triggers end to end)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

STORED: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).parent / "previous_main_8078687.json").read_text()
)


@pytest.mark.parametrize("classpath", sorted(STORED))
def test_a_trigger_serialized_by_the_previous_main_loads_and_serializes_the_same(classpath: str) -> None:
    module, _, name = classpath.rpartition(".")
    trigger = getattr(importlib.import_module(module), name)(**STORED[classpath])
    again_path, again = trigger.serialize()
    assert again_path == classpath
    assert again == STORED[classpath]
