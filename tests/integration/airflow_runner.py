"""Run real DAGs with ``airflow dags test`` (deferred triggers run inline) against the local cluster.

One AIRFLOW_HOME (SQLite) per test session; each test writes its DAG file and runs it. ``DAG.test`` writes
the DAG to the database itself (Airflow 3.3: it syncs the DAG's bundle first), so no ``airflow dags
reserialize`` precedes it (one process, about 4 s of CPU, less per run).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .dag_test_server import ForkedRun, ForkedRuns

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


@dataclass
class DagRun:
    returncode: int
    output: str

    @property
    def succeeded(self) -> bool:
        return self.returncode == 0 and "state=failed" not in self.output.lower()


@dataclass
class AirflowHome:
    home: Path
    env: dict[str, str]
    _forks: ForkedRuns | None = field(default=None, repr=False, compare=False)

    @classmethod
    def create(cls, home: Path, cluster_env: dict[str, str], migrated_db: Path | None = None) -> AirflowHome:
        """A home whose database is a copy of ``migrated_db`` when given, else migrated here (~6-10 s)."""
        (home / "dags").mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            **cluster_env,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        }
        airflow_home = cls(home, env)
        if migrated_db is not None:
            shutil.copyfile(migrated_db, home / "airflow.db")
        else:
            airflow_home.airflow("db", "migrate")
        return airflow_home

    def airflow(
        self, *args: str, timeout: float = 600, check: bool = True, extra_env: dict[str, str] | None = None
    ) -> DagRun:
        res = subprocess.run(
            [AIRFLOW, *args],
            env={**self.env, **(extra_env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        run = DagRun(res.returncode, res.stdout + res.stderr)
        if check and res.returncode != 0:
            raise AssertionError(f"airflow {' '.join(args)} exited {res.returncode}:\n{run.output[-6000:]}")
        return run

    def write_dag(self, dag_id: str, body: str) -> Path:
        path = self.home / "dags" / f"{dag_id}.py"
        path.write_text(textwrap.dedent(body))
        return path

    def test_dag(self, dag_id: str, run_after: str | None = None, timeout: float = 600) -> DagRun:
        """``airflow dags test DAG_ID``: runs the DAG in one process, deferred triggers inline.

        With ``run_after`` (ISO time) it calls ``dag.test(run_after=..., logical_date=...)`` instead, so the
        run id is the same every time: a second call is the same DagRun again, as a retry would be.
        """
        return self.start_dag(dag_id, run_after).wait(timeout)

    def start_dag(self, dag_id: str, run_after: str | None = None) -> BackgroundDagRun:
        """The same, in the background, so a test can act on the cluster while the task waits."""
        argv = [AIRFLOW, "dags", "test", dag_id]
        if run_after:
            script = DAG_TEST_AT.format(
                path=str(self.home / "dags" / f"{dag_id}.py"), dag_id=dag_id, when=run_after
            )
            argv = [sys.executable, "-c", script]
        log = open(self.home / f"{dag_id}.log", "w+")  # noqa: SIM115 - closed by BackgroundDagRun.wait
        forked = self._forked(argv[1:], log.name)  # ["dags", "test", id] or ["-c", script]
        if forked is not None:
            return BackgroundDagRun(forked, log)
        proc = subprocess.Popen(
            argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        return BackgroundDagRun(proc, log)

    def _forked(self, argv: list[str], log: str) -> ForkedRun | None:
        """The run forked from this home's ``dag_test_server`` (Airflow imported once), or None: a plain
        process (``AIRFLOW_KUEUE_TEST_FORK=0``, or an environment the server was not started with)."""
        if os.environ.get("AIRFLOW_KUEUE_TEST_FORK", "1") == "0":
            return None
        if self._forks is None:
            self._forks = ForkedRuns(self.env, self.home)
        return self._forks.start(argv, dict(self.env), log)


DAG_TEST_AT = """
import runpy, sys
from datetime import datetime
from airflow.sdk import DAG
dag = next(v for v in runpy.run_path({path!r}).values() if isinstance(v, DAG) and v.dag_id == {dag_id!r})
when = datetime.fromisoformat({when!r})
run = dag.test(run_after=when, logical_date=when)
print("dag run state=" + str(run.state))
sys.exit(0 if str(run.state).endswith("success") else 1)
"""


@dataclass
class BackgroundDagRun:
    proc: subprocess.Popen[bytes] | ForkedRun
    log: IO[str]

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()

    def wait(self, timeout: float = 600) -> DagRun:
        """The run's exit and output; a run past ``timeout`` fails the test with its output's tail (a bare
        TimeoutExpired once left a loaded CI run with nothing to read)."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            tail = self.output()[-8000:]
            raise AssertionError(
                f"`airflow dags test` still ran after {timeout:.0f} s; its output ends:\n{tail}"
            ) from None
        finally:
            self.kill()
        return DagRun(code, self.output())

    def kill(self) -> None:
        """SIGKILL the whole run: the worker dies without any cleanup."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
