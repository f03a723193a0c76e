#!/usr/bin/env python3
"""Run one command as one JUnit test case, so `make test`'s closing summary (tools/test_summary.py) counts a
step that is not pytest (the docs build, the release artifacts' check) like any test.

    python tools/junit_step.py REPORT.xml NAME -- COMMAND [ARGS...]

The command's output goes to the terminal as it runs; its last 200 lines go into the report on failure.
Exit code: the command's.
"""

from __future__ import annotations

import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import deque
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    report, name, command = Path(argv[0]), argv[1], argv[3:]
    started = time.monotonic()
    tail: deque[str] = deque(maxlen=200)
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            tail.append(line)
    seconds = time.monotonic() - started
    failed = proc.returncode != 0
    suite = ET.Element("testsuite", name=name, tests="1", failures=str(int(failed)), errors="0", skipped="0")
    case = ET.SubElement(suite, "testcase", classname="make", name=name, time=f"{seconds:.1f}")
    if failed:
        failure = ET.SubElement(case, "failure", message=f"{' '.join(command)} exited {proc.returncode}")
        failure.text = "".join(tail)
    report.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suite).write(report, encoding="unicode")
    print(f"{name}: {'failed' if failed else 'passed'} in {seconds:.0f} s")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
