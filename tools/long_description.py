#!/usr/bin/env python3
"""The package's long description (``README.pypi.md``, what a package index shows) from ``README.md``.

A package index renders the README without the repository around it: a relative link (``docs/aks.md``,
``#your-first-dag``) or image (``docs/screenshots/...``) would be broken there. Until the repository and the
docs site have public addresses ([project.urls] is empty), such a link becomes its text followed by the path
in the source tree, and an image is left out; absolute ``http(s)`` links stay. ``make dist`` builds with it
(pyproject: ``[tool.setuptools.dynamic] readme``); ``tests/unit/test_long_description.py`` keeps it current.

    python tools/long_description.py          # rewrite README.pypi.md
    python tools/long_description.py --check  # exit 1 when it is not current
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE, TARGET = REPO / "README.md", REPO / "README.pypi.md"
HEADER = "<!-- Generated from README.md by tools/long_description.py: edit README.md, then run it. -->\n\n"

_IMAGE = re.compile(r"!\[[^\]]*\]\((?!https?://)[^)]*\)\n?")
_LINK = re.compile(r"\[([^\]]+)\]\((?!https?://|mailto:)([^)\s]+)\)")


def long_description(readme: str) -> str:
    def text(match: re.Match[str]) -> str:
        label, target = match.group(1), match.group(2)
        if target.startswith("#"):
            return label
        path = target.split("#", 1)[0]
        return label if label.strip("`") == path else f"{label} (`{path}` in the source)"

    return HEADER + _LINK.sub(text, _IMAGE.sub("", readme))


def relative_links(markdown: str) -> list[str]:
    """The links and images of ``markdown`` that a package index could not resolve."""
    return [
        m.group(0)
        for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)\)", markdown)
        if not re.match(r"https?://|mailto:", m.group(1))
    ]


def main(argv: list[str]) -> int:
    wanted = long_description(SOURCE.read_text())
    if "--check" in argv:
        if not TARGET.exists() or TARGET.read_text() != wanted:
            print(f"{TARGET.name} is not current: python tools/long_description.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
