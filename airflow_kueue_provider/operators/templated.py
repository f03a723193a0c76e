"""Values a task renders with Jinja at run time: recognised when the DAG is parsed (their checks wait for
the run), and the counts turned back into integers once rendered (Jinja renders text)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def is_templated(value: object) -> bool:
    """``value`` holds Jinja (``{{ ... }}`` or ``{% ... %}``) anywhere in it."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(is_templated(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(is_templated(v) for v in value)
    return False


def as_count(value: Any) -> Any:
    """A rendered count (``"100"``, ``" 8 "``) as an int; anything else unchanged, for the checks to name."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return value
