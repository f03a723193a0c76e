"""The MultiKueue worker clusters stop once the session's last test that needs them has ended.

Two idle worker clusters cost about 13 % of a core (measured on the bed: 19.1 s of CPU a minute with them,
11.2 s without), and the modules that need them are among the longest, so they run first and the workers
would idle through the rest of the parallel pass. Every xdist worker collects the same tests, so each knows
how many need them (``multikueue_workers`` among a test's fixtures); each ended one leaves a mark in a
directory of the run (``PYTEST_XDIST_TESTRUNUID``, shared by the run's workers), and the one that leaves the
last mark stops them. A test that needs them after that (a rerun) starts them again: the fixture calls ``up``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

FIXTURE = "multikueue_workers"
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex


def needs_workers(item: pytest.Item) -> bool:
    return FIXTURE in getattr(item, "fixturenames", ())


def marks_dir(state: Path) -> Path:
    return state / "multikueue-users" / _RUN


def mark_ended(state: Path, item: pytest.Item) -> bool:
    """Leave ``item``'s mark; True when every test of the session that needs the workers has left one."""
    users = [i for i in item.session.items if needs_workers(i)]
    marks = marks_dir(state)
    marks.mkdir(parents=True, exist_ok=True)
    (marks / re.sub(r"[^A-Za-z0-9_.-]", "_", item.nodeid)[-200:]).touch()
    return len(list(marks.iterdir())) >= len(users)


def stop_workers(repo: Path, state: Path) -> None:
    """``devcluster multikueue down``, and the run's marks removed; a failure is said, not raised (the
    Makefile stops them after the pass)."""
    shutil.rmtree(marks_dir(state), ignore_errors=True)
    res = subprocess.run(
        [sys.executable, "-m", "devcluster", "multikueue", "down"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        sys.stderr.write(f"multikueue down exited {res.returncode}: {res.stderr[-500:]}\n")
