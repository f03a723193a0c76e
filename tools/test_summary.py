"""One closing line over the JUnit reports of `make test`'s passes: "tests: N passed, N failed, N skipped".

Exit code 1 when no test ran at all, any failed, or a pass left no report, so `make test` fails then.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main(paths: list[str]) -> int:
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for path in paths:
        if not Path(path).exists():
            print(f"no test report at {path}: that pass did not finish", file=sys.stderr)
            counts["errors"] += 1
            continue
        for suite in ET.parse(path).getroot().iter("testsuite"):
            for key in counts:
                counts[key] += int(suite.get(key, 0))
    failed = counts["failures"] + counts["errors"]
    passed = counts["tests"] - failed - counts["skipped"]
    print(f"tests: {passed} passed, {failed} failed, {counts['skipped']} skipped")
    return 1 if failed or counts["tests"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
