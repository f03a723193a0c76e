"""The fork server of the bed's ``airflow dags test`` runs (``tests/integration/dag_test_server.py``): what a
``BackgroundDagRun`` relies on from a ``Popen`` holds for a forked run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.dag_test_server import PRELOAD_ENV, ForkedRuns

ENV = {**os.environ, PRELOAD_ENV: "0", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[ForkedRuns]:
    forks = ForkedRuns(ENV, tmp_path)
    yield forks
    forks.close()


def test_a_run_writes_its_log_and_exits_with_its_code(runs: ForkedRuns, tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("")
    script = "import os, sys; print('hello from', os.environ['AIRFLOW_CONN_X']); sys.exit(3)"
    run = runs.start(["-c", script], {**ENV, "AIRFLOW_CONN_X": "conn"}, str(log))
    assert run is not None
    assert run.wait(timeout=60) == 3
    assert log.read_text().strip() == "hello from conn"


def test_a_run_killed_by_its_process_group_ends_like_a_popen(runs: ForkedRuns, tmp_path: Path) -> None:
    run = runs.start(["-c", "import time; time.sleep(60)"], dict(ENV), str(tmp_path / "run.log"))
    assert run is not None
    assert run.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        run.wait(timeout=0.2)
    os.killpg(run.pid, signal.SIGKILL)  # what BackgroundDagRun.kill does
    assert run.wait(timeout=30) == -signal.SIGKILL
    assert run.poll() == -signal.SIGKILL


def test_an_uncaught_error_is_printed_and_exits_1(runs: ForkedRuns, tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    run = runs.start(["-c", "raise ValueError('no such dag')"], dict(ENV), str(log))
    assert run is not None and run.wait(timeout=60) == 1
    assert "ValueError: no such dag" in log.read_text()


def test_an_environment_read_at_import_is_not_forked(runs: ForkedRuns, tmp_path: Path) -> None:
    """A config option or another home differs at import: the caller starts a plain process instead."""
    log = str(tmp_path / "run.log")
    assert runs.start(["-c", "pass"], {**ENV, "AIRFLOW__CORE__PARALLELISM": "3"}, log) is None
    assert runs.start(["-c", "pass"], {**ENV, "AIRFLOW_HOME": "/elsewhere"}, log) is None


def test_the_server_ends_with_the_process_that_started_it(tmp_path: Path) -> None:
    script = (
        "import sys; from pathlib import Path; from tests.integration.dag_test_server import ForkedRuns;"
        f"f = ForkedRuns({ENV!r}, Path({str(tmp_path)!r})); r = f.start(['-c', 'pass'], {ENV!r}, "
        f"{str(tmp_path / 'run.log')!r}); r.wait(60); print(f._proc.pid)"
    )
    out = subprocess.run([sys.executable, "-c", script], env=ENV, capture_output=True, text=True, timeout=120)
    server = int(out.stdout.strip().splitlines()[-1])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(server, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    pytest.fail(f"the server (pid {server}) outlived its test process")
