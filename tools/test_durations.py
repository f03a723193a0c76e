"""Write ``tests/module_seconds.json``: each bed test module's seconds in the last ``make test``, from the
JUnit reports of its passes (``.test-reports/{parallel,serial,quiet}.xml`` by default).

The parallel and quiet passes run the longest modules first (``tests/conftest.py``): a long module that
starts last is the pass's tail, with every other worker idle. Run this after a ``make test`` whose figures
you trust and commit the file; a module missing from it counts as ``DEFAULT_SECONDS``.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "module_seconds.json"
REPORTS = [REPO / ".test-reports" / f"{name}.xml" for name in ("parallel", "serial", "quiet")]
MIN_UNIT_SECONDS = 5
"""Unit modules shorter than this are left out (an unlisted one counts as 0 s); every bed module is kept
(an unlisted one counts as 60 s: conftest's ``DEFAULT_SECONDS``)."""


def module_seconds(reports: list[Path]) -> dict[str, int]:
    """``{tests/.../test_x.py: seconds}`` over the reports' test cases (setup and teardown included)."""
    seconds: dict[str, float] = defaultdict(float)
    for report in reports:
        for case in ET.parse(report).getroot().iter("testcase"):
            parts = case.get("classname", "").split(".")  # tests.x.test_mod, or tests.x.test_mod.TestClass
            ends = [i for i, part in enumerate(parts) if part.startswith("test_")]
            if ends:
                seconds["/".join(parts[: ends[-1] + 1]) + ".py"] += float(case.get("time") or 0)
    return {
        m: round(s)
        for m, s in sorted(seconds.items())
        if m.startswith("tests/integration/") or s >= MIN_UNIT_SECONDS
    }


def main(paths: list[str]) -> int:
    reports = [Path(p) for p in paths] or [r for r in REPORTS if r.exists()]
    if not reports:
        print("no JUnit report: run make test first, or name the reports", file=sys.stderr)
        return 1
    figures = module_seconds(reports)
    OUT.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    print(f"{OUT.relative_to(REPO)}: {len(figures)} modules, {sum(figures.values())} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
