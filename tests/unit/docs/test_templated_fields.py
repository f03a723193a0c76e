"""docs/reference/templated-fields.md is what tools/templated_fields.py makes of the operators'
``template_fields``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

TOOL = Path(__file__).resolve().parents[3] / "tools" / "templated_fields.py"
spec = importlib.util.spec_from_file_location("templated_fields", TOOL)
assert spec and spec.loader
templated_fields = importlib.util.module_from_spec(spec)
spec.loader.exec_module(templated_fields)


def test_the_templated_fields_page_is_current() -> None:
    page = templated_fields.PAGE.read_text()
    assert page == templated_fields.render(), "run: python tools/templated_fields.py"


def test_every_operator_s_fields_are_on_the_page() -> None:
    text = templated_fields.PAGE.read_text()
    for heading, path, _ in templated_fields.OPERATORS:
        section = text[text.index(f"## `{heading}`") :]
        section = section[: section.find("\n## ", 1) if "\n## " in section[1:] else len(section)]
        for field in templated_fields._load(path).template_fields:
            assert f"| `{field}` |" in section, (heading, field)
